// Reads a JSON array of AMQP message bodies on stdin and parses each with the
// official CloudEvents JavaScript SDK in structured mode, as a consumer in
// another language would. One JSON line per body on stdout:
//   {"ok":true,"id":..,"source":..,"subject":..,"data_type":..,"data":<JSON.stringify(data)>}
//   {"ok":false,"error":..}
// CE_USE_BIG_INT=true switches the SDK to its big-integer JSON parser.
const {HTTP} = require('cloudevents');

let input = '';
process.stdin.on('data', (c) => { input += c; });
process.stdin.on('end', () => {
  for (const body of JSON.parse(input)) {
    try {
      const ev = HTTP.toEvent({headers: {'content-type': 'application/cloudevents+json'}, body});
      ev.validate();
      const data = JSON.stringify(ev.data, (k, v) => (typeof v === 'bigint' ? v.toString() : v));
      console.log(JSON.stringify({ok: true, id: ev.id, source: ev.source, subject: ev.subject,
                                  data_type: typeof ev.data, data}));
    } catch (err) {
      console.log(JSON.stringify({ok: false, error: String(err.message) + ' ' + JSON.stringify(err.errors || '')}));
    }
  }
});
