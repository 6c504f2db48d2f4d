// Decodes the sidecar's OTLP/HTTP JSON export requests with code that is not
// ours: the OpenTelemetry JS project's protobufjs code generated from the
// official opentelemetry-proto definitions. Each body becomes an
// ExportTraceServiceRequest (fromObject; OTLP/JSON writes trace and span ids
// as hex, which the protobuf JSON mapping does not know, so those fields are
// hex-decoded first, as the OTLP specification says), passes verify(), is
// encoded to the protobuf wire format and decoded back; a member the
// definitions do not know is reported (fromObject would drop it silently).
// Input (stdin): a JSON array of request bodies. Output: one JSON line per span.
const root = require('@opentelemetry/otlp-proto-exporter-base/build/src/generated/root');

const Req = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const ID_FIELDS = new Set(['traceId', 'spanId', 'parentSpanId']);

function hexToBase64(obj) {
  if (Array.isArray(obj)) return obj.map(hexToBase64);
  if (obj && typeof obj === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(obj)) {
      if (ID_FIELDS.has(k)) {
        if (typeof v !== 'string' || !/^([0-9a-f]{2})*$/.test(v)) throw new Error(`${k} is not hex: ${v}`);
        out[k] = Buffer.from(v, 'hex').toString('base64');
      } else {
        out[k] = hexToBase64(v);
      }
    }
    return out;
  }
  return obj;
}

// Paths of members of a that are missing from b (what the definitions dropped).
function unknownMembers(a, b, path, out) {
  if (Array.isArray(a)) {
    a.forEach((x, i) => unknownMembers(x, (b || [])[i], `${path}[${i}]`, out));
  } else if (a && typeof a === 'object') {
    for (const k of Object.keys(a)) {
      if (!b || !(k in b)) out.push(`${path}.${k}`);
      else unknownMembers(a[k], b[k], `${path}.${k}`, out);
    }
  }
  return out;
}

const hex = (b) => Buffer.from(b || []).toString('hex');

let input = '';
process.stdin.on('data', (c) => { input += c; });
process.stdin.on('end', () => {
  for (const body of JSON.parse(input)) {
    const json = hexToBase64(JSON.parse(body));
    const msg = Req.fromObject(json);
    const err = Req.verify(msg);
    const back = Req.toObject(msg, {longs: String, enums: Number, bytes: String, arrays: true});
    const unknown = unknownMembers(json, back, '', []);
    const wire = Req.encode(msg).finish();
    const dec = Req.decode(wire);
    for (const rs of dec.resourceSpans) {
      const resource = {};
      for (const a of (rs.resource && rs.resource.attributes) || []) resource[a.key] = a.value.stringValue;
      for (const ss of rs.scopeSpans) {
        for (const s of ss.spans) {
          const attributes = {};
          for (const a of s.attributes) attributes[a.key] = a.value.stringValue;
          console.log(JSON.stringify({
            verify_error: err, unknown, wire_bytes: wire.length, resource, scope: ss.scope ? ss.scope.name : null,
            traceId: hex(s.traceId), spanId: hex(s.spanId), parentSpanId: hex(s.parentSpanId), name: s.name, kind: s.kind,
            start: String(s.startTimeUnixNano), end: String(s.endTimeUnixNano), attributes,
            status: s.status ? s.status.code : null,
          }));
        }
      }
    }
  }
});
