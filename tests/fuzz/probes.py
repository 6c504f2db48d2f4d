#!/usr/bin/python3
"""Writes the CloudEvents probes (tests/fuzz/corpus/event/probe-*.msg): one
message each against the rules of CloudEvents 1.0.2 (core, JSON format,
AMQP binding), the invalid ones and their valid counterparts. They seed the
envelope fuzz target, tests/unit/test_ce_probes.c checks each one's
expectation, and each is a file `sidecar try` reads.

A probe is a `sidecar try` message file (docs/handlers.md: field lines, a
blank line, the body to the end of the file) whose comment lines say what
the consumer must do with it:

    # expect: ok | empty | refused <a fragment of the reason>
    # id: <the event id>            # log_id: <what the log names it by>
    # original_id: <as sent>        # datacontenttype: <as given>
    # data_json: <text> | none      # data_bytes: <text> | none
    # data_bytes_hex: <hex>         # consumer: plain

Ids of events whose id is not a UUID are computed here with Python's uuid5:
the oracle for the sidecar's own (docs/contract.md). Run it again after
changing a probe: python3 tests/fuzz/probes.py"""
import json
import os
import uuid

NS = uuid.UUID("e14e4d96-96cb-4472-bb74-4bfd5af7215d")
UID = "4dc2061a-8b9e-44fe-b436-3ed01fc9eb6e"
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "event")
STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"


def ce_id(source, eid):
    """The id a CloudEvent whose id is not a UUID is consumed under."""
    return str(uuid.uuid5(NS, source + "\x00" + eid))


def event(**kw):
    e = {"specversion": "1.0", "id": UID, "type": "com.example.order.placed", "source": "urn:shop:orders"}
    for k, v in kw.items():
        if v is DROP:
            e.pop(k, None)
        else:
            e[k] = v
    return e


DROP = object()
probes = []


def probe(name, what, expect, fields=(), body="", **want):
    probes.append((name, what, expect, list(fields), body, want))


def structured(name, what, expect, ev, raw=None, **want):
    body = raw if raw is not None else json.dumps(ev, separators=(",", ":"))
    probe(name, what, expect, [("content_type", STRUCTURED)], body, **want)


def binary(name, what, expect, headers, body="", content_type="application/json", prefix="cloudEvents:", **want):
    f = [("content_type", content_type)] if content_type is not None else []
    for k, v in headers.items():
        f.append(("int-header " if isinstance(v, int) else "header ", (prefix + k, v)))
    probe(name, what, expect, f, body, **want)


BASE = {"specversion": "1.0", "id": UID, "type": "com.example.order.placed", "source": "urn:shop:orders"}

# --- id: "MUST be a non-empty string"; source + id is the identity ---------
structured("id-not-uuid", "an id that is not a UUID: consumed as the UUIDv5 of source and id", "ok",
           event(id="order-7777"), id=ce_id("urn:shop:orders", "order-7777"), original_id="order-7777")
structured("id-1-source-a", "id '1' of source /a", "ok", event(id="1", source="/a"), id=ce_id("/a", "1"))
structured("id-1-source-b", "the same id '1' of source /b: another event", "ok", event(id="1", source="/b"),
           id=ce_id("/b", "1"))
binary("id-not-uuid-binary", "the same event as id-not-uuid in binary mode: the same id", "ok",
       dict(BASE, id="order-7777"), body='{"n":1}', id=ce_id("urn:shop:orders", "order-7777"),
       original_id="order-7777")
structured("id-uuid-upper", "a UUID id: canonical lowercase, not mapped (whatever the source)", "ok",
           event(id=UID.upper(), source="/elsewhere"), id=UID, original_id=UID.upper())
structured("id-empty", "an empty id", "refused attribute 'id' must be a non-empty string", event(id=""))
structured("id-control", "an id with a control character", "refused attribute 'id' holds U+000A",
           event(id="order\n1"))
probe("id-not-uuid-message-id", "a non-UUID id with the message_id that names it", "ok",
      [("content_type", STRUCTURED), ("message_id", "order-8")], json.dumps(event(id="order-8")),
      id=ce_id("urn:shop:orders", "order-8"))
probe("id-not-uuid-message-id-differs", "a non-UUID id with a message_id naming another",
      "refused message_id property 'order-9' differs from id 'order-8'",
      [("content_type", STRUCTURED), ("message_id", "order-9")], json.dumps(event(id="order-8")),
      log_id=ce_id("urn:shop:orders", "order-8"))

# --- binary mode data of any content type (AMQP binding 3.1.1, 3.1.2) --------
binary("binary-text-plain", "binary-mode data of type text/plain: bytes", "ok", BASE, body="hello",
       content_type="text/plain", data_json="none", data_bytes="hello", datacontenttype="text/plain")
binary("binary-octets", "binary-mode data of type application/octet-stream", "ok", BASE,
       body="\x01\x02 bytes", content_type="application/octet-stream", data_json="none",
       data_bytes_hex=b"\x01\x02 bytes".hex())
binary("binary-json", "binary-mode JSON data: data_json and the same bytes", "ok", BASE, body='{"a":1}',
       data_json='{"a":1}', data_bytes='{"a":1}', datacontenttype="application/json")
binary("binary-json-invalid", "binary-mode data declared JSON that is not", "refused binary-mode body is not valid JSON",
       BASE, body="{oops", log_id=UID)
binary("binary-no-content-type", "binary mode without a content type: JSON, as datacontenttype omitted implies",
       "ok", BASE, body='[1]', content_type=None, data_json="[1]")
binary("binary-bad-media-type", "a content_type that is no media type",
       "refused attribute 'datacontenttype' ('garbage') is not a media type", BASE, body="x",
       content_type="garbage")

# --- batch mode (JSON format 4) ---------------------------------------------
probe("batch-empty", "an empty batch: valid, nothing to do", "empty", [("content_type", BATCH)], "[]")
probe("batch-empty-blank", "an empty batch with blanks", "empty", [("content_type", BATCH)], " [ ]\n")
probe("batch-one", "a batch of one event", "ok", [("content_type", BATCH)],
      "[" + json.dumps(event(id="b-1")) + "]", id=ce_id("urn:shop:orders", "b-1"))

# --- data_base64 (JSON format 3.1) ------------------------------------------
structured("base64-octets", "data_base64 with a binary type: the decoded bytes", "ok",
           event(datacontenttype="application/octet-stream", data_base64="AAEC/w=="),
           data_json="none", data_bytes_hex="000102ff")
structured("base64-no-type", "data_base64 without a datacontenttype: bytes, nothing implied", "ok",
           event(data_base64="aGVsbG8="), data_json="none", data_bytes="hello")
structured("base64-json", "data_base64 of JSON declared JSON: data_json too", "ok",
           event(datacontenttype="application/json", data_base64="eyJhIjoxfQ=="), data_json='{"a":1}',
           data_bytes='{"a":1}')
structured("base64-empty", "an empty data_base64: zero bytes", "ok", event(data_base64=""), data_bytes="")
structured("base64-invalid", "data_base64 that is not Base64", "refused member 'data_base64' is not Base64",
           event(data_base64="@@@@"))
structured("base64-unpadded", "data_base64 without its padding", "refused member 'data_base64' is not Base64",
           event(data_base64="aGVsbG8"))
structured("base64-not-string", "data_base64 that is a number", "refused member 'data_base64' is not a string",
           event(data_base64=5))
structured("base64-json-invalid", "data_base64 declared JSON that is not", "refused data_base64 decodes to data that is not valid JSON",
           event(datacontenttype="application/json", data_base64="aGVsbG8="))
structured("data-and-base64", "data together with data_base64",
           "refused members 'data' and 'data_base64' together", event(data={"a": 1}, data_base64="aGVsbG8="))

# --- time: RFC 3339 ------------------------------------------------------------
structured("time-yesterday", "time 'yesterday'", "refused attribute 'time' ('yesterday') is not an RFC 3339",
           event(time="yesterday"))
structured("time-impossible", "time 2024-02-30T25:61:00Z", "refused attribute 'time' ('2024-02-30T25:61:00Z')",
           event(time="2024-02-30T25:61:00Z"))
structured("time-feb29-2023", "February 29th of a common year", "refused attribute 'time'",
           event(time="2023-02-29T10:00:00Z"))
structured("time-no-offset", "a time without an offset", "refused attribute 'time'", event(time="2024-01-01T10:00:00"))
structured("time-valid-offset", "a leap day, a fraction and an offset", "ok", event(time="2024-02-29T10:00:00.5+05:30"))
structured("time-valid-lower", "t and z in lower case (RFC 3339 5.6)", "ok", event(time="2024-01-01t10:00:00z"))
structured("time-leap-second", "a leap second at 23:59:60 UTC", "ok", event(time="2016-12-31T23:59:60Z"))
binary("time-binary-invalid", "a binary-mode time that is not RFC 3339: the log still names the event",
       "refused attribute 'time' ('yesterday')", dict(BASE, time="yesterday"), body="{}", log_id=UID)

# --- subject: "if present, MUST be a non-empty string" -------------------
structured("subject-empty", "subject ''", "refused attribute 'subject' is empty", event(subject=""))
structured("subject-null", "subject null: unset (JSON format 2.2)", "ok", event(subject=None))
binary("subject-empty-binary", "a binary-mode subject ''", "refused attribute 'subject' is empty",
       dict(BASE, subject=""), body="{}")

# --- source: "MUST be a non-empty URI-reference" --------------------------
structured("source-space", "source 'ORDER X'", "refused attribute 'source' ('ORDER X') is not a URI-reference",
           event(source="ORDER X"))
structured("source-relative", "a relative source", "ok", event(source="/sensors/tn-1234567/alerts"))
structured("source-phone", "the spec's own example 1-555-123-4567", "ok", event(source="1-555-123-4567"))
structured("source-bare", "a bare word as source (a relative reference)", "ok", event(source="ORDER"))

# --- attribute names: "lower-case letters ('a' to 'z') or digits" ------------
structured("name-camel", "an extension named myExt", "refused attribute name 'myExt' is not lower-case",
           event(myExt="v"))
structured("name-underscore", "an extension named my_ext", "refused attribute name 'my_ext' is not lower-case",
           event(my_ext="v"))
structured("name-valid", "an extension named myext2", "ok", event(myext2="v"))
binary("name-camel-binary", "a cloudEvents:myExt header (AMQP property names are as written)",
       "refused attribute name 'myExt' is not lower-case", dict(BASE, myExt="v"), body="{}")
binary("name-http-case", "a Ce-MyExt header (HTTP header names are case-insensitive)", "ok",
       dict(BASE, MyExt="v"), body="{}", prefix="ce-")

# --- Integer: 32 bits ----------------------------------------------------------
structured("int-max", "an Integer of 2147483647", "ok", event(comexampleothervalue=2147483647))
structured("int-min", "an Integer of -2147483648", "ok", event(comexampleothervalue=-2147483648))
structured("int-over", "an Integer of 2147483648", "refused attribute 'comexampleothervalue' is 2147483648, beyond 32 bits",
           event(comexampleothervalue=2147483648))
structured("int-under", "an Integer of -2147483649", "refused beyond 32 bits", event(comexampleothervalue=-2147483649))
structured("int-huge", "an eventversion of 30 digits", "refused attribute 'eventversion' is 123456789012345678901234567890",
           event(eventversion=123456789012345678901234567890))
structured("int-fraction", "an extension of 1.5", "refused attribute 'comexampleothervalue' is a number with a fraction",
           event(comexampleothervalue=1.5))
binary("int-over-binary", "an AMQP integer header beyond 32 bits",
       "refused attribute 'eventversion' is 4294967296, beyond 32 bits", dict(BASE, eventversion=4294967296), body="{}")
structured("data-numbers-free", "data's numbers are not attributes: any size", "ok",
           event(data={"n": 123456789012345678901234567890, "x": 1.5}),
           data_json='{"n":123456789012345678901234567890,"x":1.5}')

# --- String: no control characters, no noncharacters -------------------
structured("string-bel", "a subject holding U+0007", "refused attribute 'subject' holds U+0007, a control character",
           event(subject="a\u0007b"))
structured("string-del", "an extension holding U+007F", "refused holds U+007F", event(comexamplenote="a\u007fb"))
structured("string-c1", "a type holding U+0085", "refused attribute 'type' holds U+0085", event(type="a\u0085b"))
structured("string-nonchar", "an extension holding U+FFFE", "refused holds U+FFFE, a noncharacter",
           event(comexamplenote="a\ufffeb"))
structured("string-unicode", "a subject of letters beyond ASCII", "ok", event(subject="caf\u00e9 \U0001F600"))
structured("attr-object", "an extension whose value is an object", "refused attribute 'comexamplemap' is a JSON object",
           event(comexamplemap={"a": 1}))

# --- datacontenttype, the same in both modes (JSON format 3.1.2) ------------
structured("structured-text-plain", "structured data of type text/plain: its string's content, as binary-text-plain",
           "ok", event(datacontenttype="text/plain", data="hello"), data_json="none", data_bytes="hello",
           datacontenttype="text/plain")
structured("structured-text-object", "structured data of type text/plain that is not a string",
           "refused member 'data' is not a string while datacontenttype 'text/plain' is not JSON",
           event(datacontenttype="text/plain", data={"a": 1}))
structured("structured-json-type", "structured data of type application/json", "ok",
           event(datacontenttype="application/json", data={"a": 1}), data_json='{"a":1}')
structured("structured-text-json", "text/json is JSON (*/json)", "ok",
           event(datacontenttype="text/json", data=[1]), data_json="[1]")
structured("structured-vendor-json", "a +json type", "ok",
           event(datacontenttype="application/vnd.shop+json; charset=utf-8", data={"a": 1}), data_json='{"a":1}')
structured("structured-bad-media-type", "a datacontenttype that is no media type",
           "refused attribute 'datacontenttype' ('not a type') is not a media type",
           event(datacontenttype="not a type", data="x"))
structured("dataschema-relative", "a dataschema that is not an absolute URI",
           "refused attribute 'dataschema' ('/schemas/order') is not an absolute URI",
           event(dataschema="/schemas/order"))
structured("dataschema-valid", "an absolute dataschema", "ok", event(dataschema="https://example.com/schemas/order"))

# --- mode detection (AMQP binding 3) --------------------------------------
probe("mode-json-no-headers", "application/json without CloudEvents headers: binary mode, and no attributes",
      "refused no CloudEvents specversion header", [("content_type", "application/json")],
      json.dumps(event()))
probe("mode-none-no-headers", "no content type and no CloudEvents header: structured, as in the first contract",
      "ok", [("message_id", UID)], json.dumps(event()), id=UID)
probe("mode-structured-charset", "application/cloudevents+json; charset=UTF-8: structured", "ok",
      [("content_type", "application/cloudevents+json; charset=UTF-8")], json.dumps(event()), id=UID)
probe("mode-avro", "application/cloudevents+avro: a format the sidecar cannot read",
      "refused is not a CloudEvents JSON format", [("content_type", "application/cloudevents+avro")], "x")

# --- plain mode: the same rules on the attributes it builds ------------------
probe("plain-message-id", "a plain message whose message_id is not a UUID", "ok",
      [("message_id", "order-42"), ("type", "OrderPlaced"), ("exchange", "shop")], '{"a":1}',
      consumer="plain", id=str(uuid.uuid5(NS, "order-42")), original_id="order-42", data_json='{"a":1}')


def render(fields, expect, what, want):
    lines = [f"# probe: {what}", f"# expect: {expect}"]
    for k, v in want.items():
        lines.append(f"# {k}: {v}")
    for k, v in fields:
        if isinstance(v, tuple):
            lines.append(f"{k}{v[0]}: {v[1]}")
        else:
            lines.append(f"{k}: {v}")
    return "\n".join(lines) + "\n\n"


def main():
    for old in os.listdir(OUT):
        if old.startswith("probe-"):
            os.remove(os.path.join(OUT, old))
    names = set()
    for i, (name, what, expect, fields, body, want) in enumerate(probes):
        assert name not in names, name
        names.add(name)
        path = os.path.join(OUT, f"probe-{i + 1:02d}-{name}.msg")
        with open(path, "wb") as f:
            f.write(render(fields, expect, what, want).encode() + body.encode("utf-8", "surrogatepass"))
    print(f"{len(probes)} probes in {OUT}")


if __name__ == "__main__":
    main()
