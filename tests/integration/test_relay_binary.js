// Reads the relay's messages with code that is not ours: amqplib takes them
// off the queue and the official CloudEvents JavaScript SDK parses each. A
// binary-mode message's cloudEvents: headers are mapped to the HTTP
// binding's ce- headers (content_type to content-type); a structured one is
// handed over as its body with its content type.
// Input (stdin): {"url", "queue", "n"}. Output: one JSON line per message.
const {HTTP} = require('cloudevents');
const amqp = require('amqplib');

async function main() {
  let input = '';
  for await (const c of process.stdin) input += c;
  const cfg = JSON.parse(input);
  const conn = await amqp.connect(cfg.url);
  const ch = await conn.createChannel();
  for (let got = 0; got < cfg.n;) {
    const m = await ch.get(cfg.queue, {noAck: true});
    if (!m) break;
    got++;
    const p = m.properties;
    const headers = {'content-type': p.contentType};
    const headerTypes = {};
    for (const [k, v] of Object.entries(p.headers || {})) {
      headerTypes[k] = typeof v;
      if (k.startsWith('cloudEvents:')) headers['ce-' + k.slice('cloudEvents:'.length)] = String(v);
    }
    const out = {message_id: p.messageId, content_type: p.contentType, delivery_mode: p.deliveryMode,
                 routing_key: m.fields.routingKey, body_hex: m.content.toString('hex'),
                 header_types: headerTypes};
    try {
      const ev = HTTP.toEvent({headers, body: m.content.toString('utf8')});
      ev.validate();
      Object.assign(out, {ok: true, id: ev.id, type: ev.type, source: ev.source, subject: ev.subject,
                          time: ev.time, specversion: ev.specversion, eventversion: ev.eventversion,
                          datacontenttype: ev.datacontenttype, traceparent: ev.traceparent,
                          tracestate: ev.tracestate, data_type: typeof ev.data,
                          data: JSON.stringify(ev.data)});
    } catch (err) {
      Object.assign(out, {ok: false, error: String(err.message) + ' ' + JSON.stringify(err.errors || '')});
    }
    console.log(JSON.stringify(out));
  }
  await conn.close();
}

main().catch((err) => { console.error(err); process.exit(1); });
