#!/usr/bin/env node
/*
 * rsocket-js 1.0.0-alpha.3 routing interop client (rsocket-messaging + rsocket-composite-metadata):
 * runs ONE routed interaction and prints the result as JSON (same CLI and output as
 * ../py/routing_client.py).
 *
 *   node messaging_client.js --port P --interaction I [--host 127.0.0.1] [--route R]
 *       [--data JSON] [--next JSON ...] [--next-metadata] [--auth-simple USER:PASS]
 *       [--auth-bearer TOKEN] [--auth-custom TYPE=TEXT] [--setup-auth-simple USER:PASS]
 *       [--setup-auth-bearer TOKEN] [--custom-entry MIME=TEXT ...] [--stream-data-mime MIME]
 *       [--data-mime-type MIME] [--metadata-mime-type MIME] [--take N] [--request-n N]
 *       [--timeout SECONDS]
 *
 * I: request-response, fire-and-forget, request-stream, request-channel.  TCP transport
 * (rsocket-tcp-client; Node 20 has no global WebSocket).  SETUP: metadata MIME composite, data
 * MIME application/json, keepalive 20000, lifetime 90000; --setup-auth-* put an authentication
 * entry (encodeSimpleAuthMetadata / encodeBearerAuthMetadata) in the SETUP metadata.
 *
 * With --route the request goes through rsocket-messaging's RSocketRequester:
 * route(R) (routing entry, encodeRoutes) .metadata(key, buffer) for auth, per-stream MIME and
 * custom entries, then .request((rsocket, metadatas) => ...) where the exchange encodes the
 * Map with encodeCompositeMetadata and the data with a JSON codec.  The Map means one entry per
 * key: a repeated --custom-entry MIME keeps only the last value.  Without --route the
 * composite metadata is encoded directly (no routing entry).  The per-stream data MIME entry
 * (message/x.rsocket.mime-type.v0) has no encoder in rsocket-composite-metadata 1.0.0-alpha.3:
 * its content is written here (0x80|id for a well-known type, else length-1 + ASCII).
 *
 * Channel: first payload --data (with the metadata), then one PAYLOAD per --next (with the
 * metadata only with --next-metadata), C on the last one (on REQUEST_CHANNEL without --next).
 *
 * Result: peer, interaction, route, payload | sent | payloads+completed+cancelled, error,
 * connection_error.  A payload is {data: text|null, data_b64, json, metadata: [{mime,
 * content_b64, id?, tags?}]|null, metadata_b64, metadata_error}.  Exit 0 ok, 1 ERROR from the
 * peer (error = {code, message}; connection_error = the ERROR on stream 0 when the connection
 * was closed by one: the library then fails pending requests with a plain "Closed." Error, so
 * error is set to the connection error), 2 local failure/timeout, 3 unsupported.
 */
"use strict";

const { RSocketConnector } = require("rsocket-core");
const { TcpClientTransport } = require("rsocket-tcp-client");
const {
  WellKnownMimeType,
  encodeCompositeMetadata,
  encodeRoutes,
  encodeSimpleAuthMetadata,
  encodeBearerAuthMetadata,
  encodeCustomAuthMetadata,
  decodeCompositeMetadata,
  decodeRoutes,
} = require("rsocket-composite-metadata");
const { RSocketRequester } = require("rsocket-messaging");
const common = require("../common.js");

const PEER = "rsocket-js-1.0.0-alpha.3";
const COMPOSITE = WellKnownMimeType.MESSAGE_RSOCKET_COMPOSITE_METADATA.string;
const INTERACTIONS = ["request-response", "fire-and-forget", "request-stream", "request-channel"];

/** rsocket-messaging's Codec<D> interface, for JSON. */
const JSON_CODEC = {
  mimeType: "application/json",
  encode: (entity) => Buffer.from(JSON.stringify(entity), "utf8"),
  decode: (buffer) => JSON.parse(buffer.toString("utf8")),
};

class UsageError extends Error {}

function parseArgs(argv) {
  const spec = {
    host: "string",
    port: "int",
    interaction: "string",
    route: "string",
    data: "string",
    "next-metadata": "bool",
    "auth-simple": "string",
    "auth-bearer": "string",
    "auth-custom": "string",
    "setup-auth-simple": "string",
    "setup-auth-bearer": "string",
    "stream-data-mime": "string",
    "data-mime-type": "string",
    "metadata-mime-type": "string",
    take: "int",
    "request-n": "int",
    timeout: "int",
  };
  const repeated = { next: [], "custom-entry": [] };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].slice(2);
    if (argv[i].startsWith("--") && name in repeated) {
      if (i + 1 >= argv.length) {
        throw new UsageError(`option --${name} needs a value`);
      }
      repeated[name].push(argv[++i]);
    } else {
      rest.push(argv[i]);
    }
  }
  const options = parseOptions(rest, spec);
  options.next = repeated.next;
  options["custom-entry"] = repeated["custom-entry"];
  if (options.port === undefined || !INTERACTIONS.includes(options.interaction)) {
    throw new UsageError(`--port and --interaction (${INTERACTIONS.join(", ")}) are required`);
  }
  options.host = options.host || common.HOST;
  options.timeout = options.timeout || 30;
  options["request-n"] = options["request-n"] || common.MAX_REQUEST_N;
  options["data-mime-type"] = options["data-mime-type"] || "application/json";
  options["metadata-mime-type"] = options["metadata-mime-type"] || COMPOSITE;
  return options;
}

/** --name value / --flag parsing with common.js's rules (no positional arguments). */
function parseOptions(argv, spec) {
  const options = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const name = arg.startsWith("--") ? arg.slice(2) : null;
    if (name === null || spec[name] === undefined) {
      throw new UsageError(`unexpected argument ${arg}`);
    }
    if (spec[name] === "bool") {
      options[name] = true;
      continue;
    }
    if (i + 1 >= argv.length) {
      throw new UsageError(`option --${name} needs a value`);
    }
    const value = argv[++i];
    if (spec[name] === "int") {
      if (!/^-?\d+$/.test(value)) {
        throw new UsageError(`option --${name} needs an integer`);
      }
      options[name] = parseInt(value, 10);
    } else {
      options[name] = value;
    }
  }
  return options;
}

function splitPair(value, sep, what) {
  const at = value.indexOf(sep);
  if (at < 0) {
    throw new UsageError(`${what} must look like a${sep}b, got ${JSON.stringify(value)}`);
  }
  return [value.slice(0, at), value.slice(at + 1)];
}

function authBuffer(simple, bearer, custom) {
  if (simple !== undefined) {
    const [user, password] = splitPair(simple, ":", "--auth-simple");
    return encodeSimpleAuthMetadata(user, password);
  }
  if (bearer !== undefined) {
    return encodeBearerAuthMetadata(bearer);
  }
  if (custom !== undefined) {
    const [type, text] = splitPair(custom, "=", "--auth-custom");
    return encodeCustomAuthMetadata(type, Buffer.from(text, "utf8"));
  }
  return null;
}

/** Content of a message/x.rsocket.mime-type.v0 entry (PerStreamDataMimeTypesDefinition.md). */
function mimeTypeEntry(mime) {
  const known = WellKnownMimeType.fromString(mime);
  if (known !== WellKnownMimeType.UNPARSEABLE_MIME_TYPE) {
    return Buffer.from([0x80 | known.identifier]);
  }
  const name = Buffer.from(mime, "ascii");
  return Buffer.concat([Buffer.from([name.length - 1]), name]);
}

/** [key, Buffer] pairs after the routing entry, in order: auth, per-stream MIME, custom. */
function extraEntries(options) {
  const entries = [];
  const auth = authBuffer(options["auth-simple"], options["auth-bearer"], options["auth-custom"]);
  if (auth !== null) {
    entries.push([WellKnownMimeType.MESSAGE_RSOCKET_AUTHENTICATION, auth]);
  }
  if (options["stream-data-mime"] !== undefined) {
    entries.push([WellKnownMimeType.MESSAGE_RSOCKET_MIMETYPE,
      mimeTypeEntry(options["stream-data-mime"])]);
  }
  for (const entry of options["custom-entry"]) {
    const [mime, text] = splitPair(entry, "=", "--custom-entry");
    entries.push([mime, Buffer.from(text, "utf8")]);
  }
  return entries;
}

function describeMetadata(metadata) {
  if (metadata === null || metadata === undefined || metadata.length === 0) {
    return { metadata: null, metadata_b64: null, metadata_error: null };
  }
  const entries = [];
  try {
    for (const entry of decodeCompositeMetadata(metadata)) {
      // ExplicitMimeTimeEntry (custom MIME) has no mimeType getter in 1.0.0-alpha.3: its
      // name is in .type (a string); ReservedMimeTypeEntry.type is the unknown id (a number)
      let mime = entry.mimeType === undefined ? null : entry.mimeType;
      if (mime === null && typeof entry.type === "string") {
        mime = entry.type;
      }
      const out = { mime, content_b64: entry.content.toString("base64") };
      if (typeof entry.type === "number") {
        out.id = entry.type; // ReservedMimeTypeEntry: an id this library does not know
      }
      if (out.mime === WellKnownMimeType.MESSAGE_RSOCKET_ROUTING.string) {
        out.tags = Array.from(decodeRoutes(entry.content));
      }
      entries.push(out);
    }
  } catch (e) {
    return { metadata: entries, metadata_b64: metadata.toString("base64"),
      metadata_error: String(e && e.message) };
  }
  return { metadata: entries, metadata_b64: metadata.toString("base64"), metadata_error: null };
}

function describe(payload, dataMime) {
  const data = common.toBuffer(payload ? payload.data : null) || Buffer.alloc(0);
  let text = null;
  const decoder = new TextDecoder("utf-8", { fatal: true });
  try {
    text = decoder.decode(data);
  } catch (e) {
    text = null;
  }
  let json = null;
  if (text !== null && text !== "" && (dataMime === "application/json" ||
      dataMime.endsWith("+json"))) {
    try {
      json = JSON_CODEC.decode(data);
    } catch (e) {
      json = null;
    }
  }
  return { data: text, data_b64: data.toString("base64"), json,
    ...describeMetadata(common.toBuffer(payload ? payload.metadata : null)) };
}

let options = null;
try {
  options = parseArgs(process.argv.slice(2));
  extraEntries(options); // validate --auth-*/--custom-entry before connecting
  authBuffer(options["setup-auth-simple"], options["setup-auth-bearer"]);
  for (const text of [options.data, ...options.next]) {
    const mime = options["stream-data-mime"] || options["data-mime-type"];
    if (text !== undefined && mime === "application/json") {
      JSON.parse(text);
    }
  }
} catch (e) {
  options = null;
  common.failure(`usage: ${e && e.message}`);
}
if (options !== null) {
  common.overallTimeout(options.timeout, options.interaction);
  main().catch((e) => common.failure(`${e && e.stack ? e.stack : e}`));
}

function result(extra) {
  return { peer: PEER, interaction: options.interaction, route: options.route || null, ...extra };
}

async function main() {
  let setupPayload;
  const setupAuth = authBuffer(options["setup-auth-simple"], options["setup-auth-bearer"]);
  if (setupAuth !== null) {
    setupPayload = {
      data: Buffer.alloc(0),
      metadata: encodeCompositeMetadata([[WellKnownMimeType.MESSAGE_RSOCKET_AUTHENTICATION,
        setupAuth]]),
    };
  }
  const connector = new RSocketConnector({
    setup: {
      keepAlive: 20000,
      lifetime: 90000,
      dataMimeType: options["data-mime-type"],
      metadataMimeType: options["metadata-mime-type"],
      payload: setupPayload,
    },
    transport: new TcpClientTransport({
      connectionOptions: { host: options.host, port: options.port },
    }),
  });
  const rsocket = await common.connectOrFail(connector);
  if (rsocket === null) {
    return;
  }
  let connectionError = null;
  const done = (code, obj) => {
    if (common.isFinishing()) return;
    common.finish(code, { ...obj, connection_error: connectionError }, true);
    rsocket.close();
  };
  const fail = (e, extra) => {
    const info = common.errorInfo(e);
    if (info) {
      done(common.EXIT_RSOCKET_ERROR, result({ error: info, ...extra }));
      return;
    }
    // a request failed with a plain Error: the connection closing ("Closed. Original cause
    // [...]"); the ERROR on stream 0 that closed it (if any) is reported by onClose, which
    // the library calls right after failing the streams
    setImmediate(() => {
      if (connectionError !== null) {
        done(common.EXIT_RSOCKET_ERROR, result({ error: connectionError, ...extra }));
      } else {
        done(common.EXIT_FAILURE, result({ failure: String(e && e.message), ...extra }));
      }
    });
  };
  rsocket.onClose((e) => {
    const info = common.errorInfo(e);
    if (info) {
      connectionError = info;
    }
    setImmediate(() => {
      if (info) {
        done(common.EXIT_RSOCKET_ERROR, result({ error: info }));
      } else {
        done(common.EXIT_FAILURE, result({ failure: "connection closed" }));
      }
    });
  });

  const dataMime = options["stream-data-mime"] || options["data-mime-type"];
  const data = options.data === undefined ? Buffer.alloc(0) :
    dataMime === "application/json" ? JSON_CODEC.encode(JSON.parse(options.data)) :
      Buffer.from(options.data, "utf8");

  // exchange(rsocket, metadata Buffer) runs the interaction
  const run = (exchange) => {
    if (options.route !== undefined) {
      let spec = RSocketRequester.wrap(rsocket).route(options.route);
      for (const [key, buffer] of extraEntries(options)) {
        spec = spec.metadata(key, buffer);
      }
      spec.request((socket, metadatas) => exchange(socket, encodeCompositeMetadata(metadatas)));
    } else {
      exchange(rsocket, encodeCompositeMetadata(extraEntries(options)));
    }
  };

  switch (options.interaction) {
    case "request-response":
      run((socket, metadata) =>
        socket.requestResponse({ data, metadata }, {
          onNext: (p) => done(common.EXIT_OK, result({ payload: describe(p, dataMime) })),
          onComplete: () => done(common.EXIT_OK, result({ payload: null })),
          onError: (e) => fail(e, {}),
          onExtension() {},
        }));
      break;
    case "fire-and-forget":
      run((socket, metadata) =>
        socket.fireAndForget({ data, metadata }, {
          onComplete: () => done(common.EXIT_OK, result({ sent: true })),
          onError: (e) => fail(e, {}),
        }));
      break;
    case "request-stream":
      run((socket, metadata) =>
        collect((subscriber) =>
          socket.requestStream({ data, metadata }, options["request-n"], subscriber)));
      break;
    case "request-channel":
      run((socket, metadata) => channel(socket, metadata));
      break;
  }

  function collect(start, handlers) {
    return common.collect(start, {
      describe: (p) => describe(p, dataMime),
      take: options.take,
      requestN: options["request-n"],
      end: (extra) => done(common.EXIT_OK, result(extra)),
      fail,
    }, handlers);
  }

  function channel(socket, metadata) {
    const later = options.next.map((text) => {
      const p = { data: dataMime === "application/json" ?
        JSON_CODEC.encode(JSON.parse(text)) : Buffer.from(text, "utf8") };
      return options["next-metadata"] ? { ...p, metadata } : p;
    });
    let outboundDone = later.length === 0;
    let handle = null;
    const send = (n) => {
      while (n > 0 && later.length && !outboundDone) {
        const p = later.shift();
        n--;
        if (!later.length) {
          outboundDone = true;
          handle.onNext(p, true);
          return;
        }
        handle.onNext(p, false);
      }
    };
    handle = collect(
      (subscriber) => socket.requestChannel({ data, metadata }, options["request-n"],
        later.length === 0, subscriber),
      {
        request: (n) => send(n),
        cancel: () => {
          outboundDone = true;
        },
      },
    );
  }
}
