// Publishes CloudEvents the way outside code does, for test_envelope_interop.py:
// the official JavaScript SDK's binary output (HTTP: ce- headers; Kafka: ce_
// headers) put on AMQP headers as a publisher would, the SDK's structured
// events as a batch (application/cloudevents-batch+json, read back by the
// SDK), and plain amqplib publishers with UUID and non-UUID message_ids.
// Everything is sent twice or more (a publisher's repeats), under confirms.
// Input (stdin): {"url", "ce_exchange", "plain_exchange", "tag"}.
// Output (stdout): one JSON object describing what was sent.
const {CloudEvent, HTTP, Kafka} = require('cloudevents');
const amqp = require('amqplib');
const crypto = require('crypto');

function amqpProps(headers) {
  // An HTTP or Kafka binding's headers as AMQP message properties: content-type
  // is the content_type property, the ce-/ce_ headers go on as they are.
  const props = {persistent: true, headers: {}};
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === 'content-type') props.contentType = v;
    else props.headers[k] = v;
  }
  return props;
}

async function main() {
  let input = '';
  for await (const c of process.stdin) input += c;
  const cfg = JSON.parse(input);
  const conn = await amqp.connect(cfg.url);
  const ch = await conn.createConfirmChannel();
  const sent = {binary: [], kafka: [], batch: [], batch_parsed: 0, plain: []};

  for (let i = 0; i < 3; i++) {
    const ev = new CloudEvent({id: crypto.randomUUID(), type: 'KEEP_SDK_BINARY', source: '/shop/orders',
                               subject: String(2000 + i), eventversion: i + 1,
                               datacontenttype: 'application/json', data: {orderId: 2000 + i, note: "it's \u00e9"}});
    const m = HTTP.binary(ev);
    for (let r = 0; r < 2; r++) ch.publish(cfg.ce_exchange, 'KEEP_SDK_BINARY', Buffer.from(m.body), amqpProps(m.headers));
    sent.binary.push({id: ev.id, body: m.body, time: ev.time, headers: m.headers});
  }
  for (let i = 0; i < 2; i++) {
    const ev = new CloudEvent({id: crypto.randomUUID(), type: 'KEEP_SDK_KAFKA', source: '/shop/orders',
                               subject: String(3000 + i), datacontenttype: 'application/json',
                               data: {orderId: 3000 + i}});
    const m = Kafka.binary(ev);
    const body = JSON.stringify(m.value);
    for (let r = 0; r < 2; r++) ch.publish(cfg.ce_exchange, 'KEEP_SDK_KAFKA', Buffer.from(body), amqpProps(m.headers));
    sent.kafka.push({id: ev.id, body, headers: m.headers});
  }
  const members = [];
  for (let i = 0; i < 3; i++)
    members.push(new CloudEvent({id: crypto.randomUUID(), type: 'KEEP_SDK_BATCH', source: '/shop/orders',
                                 subject: String(4000 + i), data: {orderId: 4000 + i, items: [i, i + 0.5]}}));
  const batchBody = '[' + members.map((e) => e.toString()).join(',') + ']';
  const parsed = HTTP.toEvent({headers: {'content-type': 'application/cloudevents-batch+json'}, body: batchBody});
  sent.batch_parsed = Array.isArray(parsed) ? parsed.length : -1;
  for (let r = 0; r < 2; r++)
    ch.publish(cfg.ce_exchange, 'KEEP_SDK_BATCH', Buffer.from(batchBody),
               {persistent: true, contentType: 'application/cloudevents-batch+json'});
  sent.batch = members.map((e) => ({id: e.id, member: e.toString()}));

  const ids = [crypto.randomUUID().toUpperCase(), 'order-' + cfg.tag + '-1', 'urn:shop:order:' + cfg.tag + ':2'];
  ids.forEach((messageId, i) => {
    const body = JSON.stringify({order: {id: 5000 + i}, lines: [{sku: 'A', qty: 2}]});
    for (let r = 0; r < 3; r++)
      ch.publish(cfg.plain_exchange, 'KEEP.order.placed', Buffer.from(body),
                 {persistent: true, contentType: 'application/json', messageId,
                  timestamp: 1764410400 + i, headers: {eventversion: i + 1}});
    sent.plain.push({message_id: messageId, body});
  });
  await ch.waitForConfirms();
  await conn.close();
  console.log(JSON.stringify(sent));
}

main().catch((err) => { console.error(String(err && err.stack || err)); process.exit(1); });
