/*
 * Shared helpers for the rsocket-js interop peer scripts (no npm dependencies).
 *
 * Used by js-1.0.0-alpha.3/{server,client,messaging_client}.js and js-0.0.27/{server,client}.js.
 * The command line and the JSON output are the same for every peer (rsocket-py
 * included, see py/peer_common.py); they are documented in ../peers.py and README.md.
 */
"use strict";

const crypto = require("crypto");

const HOST = "127.0.0.1";
const MAX_REQUEST_N = 2147483647;

/* Exit codes shared by all peer scripts. */
const EXIT_OK = 0;
const EXIT_RSOCKET_ERROR = 1; // the peer reported an RSocket ERROR frame
const EXIT_FAILURE = 2; // usage error, connection failure, timeout, crash
const EXIT_UNSUPPORTED = 3; // the peer library cannot do what was asked

/**
 * Parse `--name value` options and `--flag` switches plus positional arguments.
 * `spec` maps option names to "string" | "int" | "bool".  A usage error finishes with
 * EXIT_FAILURE and throws.
 */
function parseArgs(argv, spec) {
  const options = {};
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith("--")) {
      positional.push(arg);
      continue;
    }
    let name = arg.slice(2);
    let value;
    const eq = name.indexOf("=");
    if (eq >= 0) {
      value = name.slice(eq + 1);
      name = name.slice(0, eq);
    }
    const kind = spec[name];
    if (kind === undefined) {
      usageError(`unknown option --${name}`);
    }
    if (kind === "bool") {
      options[name] = true;
      continue;
    }
    if (value === undefined) {
      if (i + 1 >= argv.length) {
        usageError(`option --${name} needs a value`);
      }
      value = argv[++i];
    }
    if (kind === "int") {
      if (!/^-?\d+$/.test(value)) {
        usageError(`option --${name} needs an integer, got ${JSON.stringify(value)}`);
      }
      options[name] = parseInt(value, 10);
    } else {
      options[name] = value;
    }
  }
  return { options, positional };
}

let finishing = false;
let overallTimer = null;

/**
 * Write one JSON line to stdout and end the process with `code`.  Only the first call counts
 * (closing a connection fires the libraries' close callbacks synchronously).
 * drain=false: exit as soon as stdout is flushed.
 * drain=true: let the event loop run dry so the socket flushes what was written (end() sends
 *   pending data before FIN); a 3 s unref'd timer forces the exit if a library leaks a handle.
 */
function finish(code, obj, drain) {
  if (finishing) {
    return;
  }
  finishing = true;
  process.exitCode = code;
  const line = obj === undefined ? "" : JSON.stringify(obj) + "\n";
  if (overallTimer !== null) {
    clearTimeout(overallTimer);
  }
  if (drain) {
    process.stdout.write(line);
    setTimeout(() => process.exit(code), 3000).unref();
  } else {
    process.stdout.write(line, () => process.exit(code));
  }
}

function usageError(message) {
  finish(EXIT_FAILURE, { failure: `usage: ${message}` });
  throw new Error(`usage: ${message}`);
}

function unsupported(reason) {
  finish(EXIT_UNSUPPORTED, { unsupported: reason });
}

function failure(message) {
  finish(EXIT_FAILURE, { failure: message });
}

/** Emit one JSON event line (server side), synchronously on Linux pipes. */
function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

/** The repeated pattern used for --data-size / --metadata-size: byte i is i % 256. */
function pattern(n) {
  const buf = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) {
    buf[i] = i % 256;
  }
  return buf;
}

function toBuffer(value) {
  if (value === null || value === undefined) {
    return null;
  }
  if (Buffer.isBuffer(value)) {
    return value;
  }
  if (typeof value === "string") {
    return Buffer.from(value, "utf8");
  }
  return Buffer.from(value);
}

function sha256(buf) {
  return crypto.createHash("sha256").update(buf).digest("hex");
}

/**
 * Describe a received payload.  Data null/undefined is reported as "" (RSocket has no
 * "absent data"); metadata null/undefined is reported as null (no M flag seen by the lib).
 *   full:   {"data": b64, "metadata": b64|null}
 *   digest: {"data_len", "data_sha256", "metadata_len", "metadata_sha256"} (null when absent)
 *   both:   all six keys
 */
function describePayload(payload, mode) {
  const data = toBuffer(payload ? payload.data : null) || Buffer.alloc(0);
  const metadata = toBuffer(payload ? payload.metadata : null);
  const out = {};
  if (mode !== "digest") {
    out.data = data.toString("base64");
    out.metadata = metadata === null ? null : metadata.toString("base64");
  }
  if (mode !== "full") {
    out.data_len = data.length;
    out.data_sha256 = sha256(data);
    out.metadata_len = metadata === null ? null : metadata.length;
    out.metadata_sha256 = metadata === null ? null : sha256(metadata);
  }
  return out;
}

/** SETUP payload from --setup-data/--setup-metadata (UTF-8), or undefined if neither given. */
function setupPayloadFromOptions(options) {
  if (options["setup-data"] === undefined && options["setup-metadata"] === undefined) {
    return undefined;
  }
  const payload = { data: Buffer.from(options["setup-data"] || "", "utf8") };
  if (options["setup-metadata"] !== undefined) {
    payload.metadata = Buffer.from(options["setup-metadata"], "utf8");
  }
  return payload;
}

/** Build {data, metadata} Buffers from --data/--data-b64/--data-size, --metadata... options. */
function payloadFromOptions(options) {
  let data = Buffer.alloc(0);
  if (options["data-size"] !== undefined) {
    data = pattern(options["data-size"]);
  } else if (options["data-b64"] !== undefined) {
    data = Buffer.from(options["data-b64"], "base64");
  } else if (options.data !== undefined) {
    data = Buffer.from(options.data, "utf8");
  }
  let metadata;
  if (options["metadata-size"] !== undefined) {
    metadata = pattern(options["metadata-size"]);
  } else if (options["metadata-b64"] !== undefined) {
    metadata = Buffer.from(options["metadata-b64"], "base64");
  } else if (options.metadata !== undefined) {
    metadata = Buffer.from(options.metadata, "utf8");
  }
  return { data, metadata };
}

/* ---- demo responder rules (same as rsocket_tx.apps.demo.DemoResponder + "error:") ---- */

/** If data starts with "error:", the application error message (rest of data), else null. */
function errorRequested(data) {
  const buf = toBuffer(data) || Buffer.alloc(0);
  const prefix = Buffer.from("error:");
  if (buf.length >= prefix.length && buf.subarray(0, prefix.length).equals(prefix)) {
    return buf.subarray(prefix.length).toString("utf8");
  }
  return null;
}

/** Request-stream count: decimal data, 10 if empty; throws on anything else. */
function streamCount(data) {
  const text = (toBuffer(data) || Buffer.alloc(0)).toString("latin1");
  if (text === "") {
    return 10;
  }
  if (!/^\d+$/.test(text)) {
    throw new Error(`request-stream data must be a decimal count, got ${JSON.stringify(text)}`);
  }
  return parseInt(text, 10);
}

/** Request-stream demand: {count, error}; error is the "error:" message, or why the data is
 *  not a count, or null. */
function streamRequest(data) {
  const error = errorRequested(data);
  if (error !== null) {
    return { count: 0, error };
  }
  try {
    return { count: streamCount(data), error: null };
  } catch (e) {
    return { count: 0, error: e.message };
  }
}

/** Print event ``event`` for a received payload, with ``extra`` fields. */
function payloadEvent(event, payload, extra) {
  emit({ event, ...extra, ...describePayload(payload, "both") });
}

/** The demo echo of ``payload``: its data (b"" if none) and its metadata when present.
 *  (1.0.0-alpha.3 sets the M flag iff metadata is truthy; an empty Buffer is truthy.) */
function echoPayload(payload) {
  const out = { data: toBuffer(payload.data) || Buffer.alloc(0) };
  if (payload.metadata !== undefined && payload.metadata !== null) {
    out.metadata = toBuffer(payload.metadata);
  }
  return out;
}

/** The SETUP of the demo clients: --keepalive/--lifetime (ms, defaulted), octet-stream MIME
 *  types, the payload of --setup-data/--setup-metadata. */
function setupFromOptions(options) {
  return {
    keepAlive: options.keepalive || 20000,
    lifetime: options.lifetime || 90000,
    dataMimeType: "application/octet-stream",
    metadataMimeType: "application/octet-stream",
    payload: setupPayloadFromOptions(options),
  };
}

/** A demo client's ways out: ``done(code, obj)`` finishes once and then calls ``close()``;
 *  ``fail(e, extra)`` finishes with ``result({error, ...extra})`` for an RSocket error (exit
 *  EXIT_RSOCKET_ERROR), else with ``result({failure, ...extra})`` (EXIT_FAILURE);
 *  ``closedBy(e)`` is the connection's end: an ERROR on stream 0 (e.g. REJECTED_SETUP)
 *  finishes with ``result({error, connection_error})`` (EXIT_RSOCKET_ERROR).
 *  rsocket-js 1.0.0-alpha.3 fails the pending requests with a plain Error ("Closed. Original
 *  cause [...]") *before* it reports the ERROR that closed the connection, so a failure that is
 *  not an RSocket error waits one turn of the event loop for that report. */
function clientOutcome(result, close) {
  const done = (code, obj) => {
    if (isFinishing()) return;
    finish(code, obj, true); // first: close() fires the close callbacks synchronously
    close();
  };
  const fail = (e, extra) => {
    const info = errorInfo(e);
    if (info) {
      done(EXIT_RSOCKET_ERROR, result({ error: info, ...extra }));
    } else {
      setImmediate(() =>
        done(EXIT_FAILURE, result({ failure: String(e && e.message), ...extra })),
      );
    }
  };
  const closedBy = (e) => {
    const info = errorInfo(e);
    if (info) {
      done(EXIT_RSOCKET_ERROR, result({ error: info, connection_error: info }));
    } else {
      done(EXIT_FAILURE, result({ failure: `connection closed: ${e && e.message}` }));
    }
  };
  return { done, fail, closedBy };
}

/** The demo servers' SETUP rule: data starting with "reject:" is refused with
 *  ERROR[REJECTED_SETUP] and the rest of the data as the message; returns that message or null. */
function rejectRequested(payload) {
  const data = toBuffer(payload && payload.data);
  if (data && data.toString("latin1").startsWith("reject:")) {
    return data.subarray("reject:".length).toString("utf8");
  }
  return null;
}

/** Option spec shared by all clients. */
const CLIENT_OPTIONS = {
  host: "string",
  port: "int",
  data: "string",
  "data-b64": "string",
  "data-size": "int",
  metadata: "string",
  "metadata-b64": "string",
  "metadata-size": "int",
  "request-n": "int",
  take: "int",
  count: "int",
  fragment: "int",
  digest: "bool",
  timeout: "int",
  keepalive: "int",
  lifetime: "int",
  completion: "string",
  "setup-data": "string",
  "setup-metadata": "string",
  transport: "string",
  path: "string",
};

const SERVER_OPTIONS = {
  host: "string",
  port: "int",
  fragment: "int",
  completion: "string",
  "request-n": "int",
  timeout: "int",
  "watch-stdin": "bool",
  transport: "string",
  path: "string",
};

const INTERACTIONS = [
  "request-response",
  "fire-and-forget",
  "metadata-push",
  "request-stream",
  "request-channel",
];

/** Parse and validate client argv; returns options with defaults and `interaction`. */
function parseClientArgs(argv) {
  const { options, positional } = parseArgs(argv, CLIENT_OPTIONS);
  if (positional.length !== 1 || !INTERACTIONS.includes(positional[0])) {
    usageError(`exactly one interaction expected, one of ${INTERACTIONS.join(", ")}`);
  }
  if (options.port === undefined) {
    usageError("--port is required");
  }
  options.interaction = positional[0];
  options.host = options.host || HOST;
  options.timeout = options.timeout || 30;
  options["request-n"] = options["request-n"] || MAX_REQUEST_N;
  if (options.count === undefined) {
    options.count = 3;
  }
  if (options.count < 1) {
    usageError("--count must be >= 1 (the first payload travels in REQUEST_CHANNEL)");
  }
  checkCompletion(options);
  checkTransport(options);
  options.mode =
    options.digest || options["data-size"] !== undefined || options["metadata-size"] !== undefined
      ? "digest"
      : "full";
  return options;
}

function parseServerArgs(argv) {
  const { options, positional } = parseArgs(argv, SERVER_OPTIONS);
  if (positional.length) {
    usageError(`unexpected argument ${positional[0]}`);
  }
  options.host = options.host || HOST;
  if (options.port === undefined) {
    options.port = 0;
  }
  options["request-n"] = options["request-n"] || 256;
  options.timeout = options.timeout || 600;
  checkCompletion(options);
  checkTransport(options);
  return options;
}

/** --transport tcp (default) | ws; --path: the WebSocket URL path (default "/"). */
function checkTransport(options) {
  options.transport = options.transport || "tcp";
  if (!["tcp", "ws"].includes(options.transport)) {
    usageError("--transport must be tcp or ws");
  }
  options.path = options.path || "/";
  if (!options.path.startsWith("/")) {
    options.path = "/" + options.path;
  }
}

/** ws://host:port/path of a client's options. */
function wsUrl(options) {
  return `ws://${options.host}:${options.port}${options.path}`;
}

/**
 * The "ws" module a js peer folder depends on, or the copy nested under `packageName` (the
 * rsocket-websocket-server packages pin their own ws: 8.2.3 for 1.0.0-alpha.3, 7.5.14 for
 * 0.0.27), resolved from the calling peer's folder `dir`.
 */
function requireWs(dir, packageName) {
  const paths = [dir];
  if (packageName) {
    paths.unshift(require("path").dirname(require.resolve(packageName + "/package.json",
      { paths: [dir] })));
  }
  return require(require.resolve("ws", { paths }));
}

function checkCompletion(options) {
  if (options.completion !== undefined && !["flag", "frame"].includes(options.completion)) {
    usageError("--completion must be flag or frame");
  }
}

/** Stop the server after --timeout seconds, or at stdin EOF with --watch-stdin. */
function serverLifetime(options, stop) {
  const timer = setTimeout(() => stop("timeout"), options.timeout * 1000);
  if (options["watch-stdin"]) {
    process.stdin.on("end", () => stop("stdin closed"));
    process.stdin.on("error", () => stop("stdin closed"));
    process.stdin.resume();
  }
  return timer;
}

/** Exit with EXIT_FAILURE after `seconds`, printing a timeout failure. Returns the timer. */
function overallTimeout(seconds, what) {
  overallTimer = setTimeout(() => failure(`timeout after ${seconds}s: ${what}`), seconds * 1000);
  return overallTimer;
}

/** Numeric RSocket error code from a library error object (both rsocket-js lines). */
function errorInfo(error) {
  if (error && error.source && typeof error.source.code === "number") {
    // rsocket-js 0.0.27: createErrorFromFrame puts the frame fields in .source
    return { code: error.source.code, message: String(error.source.message) };
  }
  if (error && typeof error.code === "number") {
    // rsocket-js 1.0: RSocketError(code, message)
    return { code: error.code, message: String(error.message) };
  }
  return null;
}

/**
 * Demand-driven emitter of b"0" .. b"N-1" for the request-stream responder.
 * sink: {next(payload, isLast), complete(), error(message)}; completion "flag" | "frame".
 */
/**
 * What the request-stream and request-channel responders' outbound sides share: request(n)
 * adds outbound credit (printing "request_n"), cancel() ends it (printing "cancel"), drain()
 * fails it with the requested application error or else runs the subclass's drainDemand().
 */
class OutboundDemand {
  constructor(interaction, completion, sink, error) {
    this.interaction = interaction;
    this.completion = completion;
    this.sink = sink;
    this.error = error === undefined ? null : error;
    this.demand = 0;
    this.done = false;
    this.firstRequest = true;
  }

  request(n) {
    emit({ event: "request_n", interaction: this.interaction, n, initial: this.firstRequest });
    this.firstRequest = false;
    this.demand += n;
    this.drain();
  }

  cancel() {
    if (!this.done) {
      this.done = true;
      emit({ event: "cancel", interaction: this.interaction, ...this.cancelDetails() });
    }
  }

  /** Extra fields of the "cancel" event. */
  cancelDetails() {
    return {};
  }

  drain() {
    if (this.done) {
      return;
    }
    if (this.error !== null) {
      this.done = true;
      this.sink.error(this.error);
      return;
    }
    this.drainDemand();
  }
}

class CountEmitter extends OutboundDemand {
  constructor(count, completion, sink, error) {
    super("request-stream", completion, sink, error);
    this.count = count;
    this.next = 0;
  }

  cancelDetails() {
    return { sent: this.next };
  }

  drainDemand() {
    while (this.demand > 0 && this.next < this.count && !this.done) {
      const last = this.next === this.count - 1;
      const payload = { data: Buffer.from(String(this.next)) };
      this.next++;
      this.demand--;
      if (last && this.completion === "flag") {
        this.done = true;
        this.sink.next(payload, true);
        return;
      }
      this.sink.next(payload, false);
    }
    if (this.next >= this.count && !this.done) {
      this.done = true;
      this.sink.complete();
    }
  }
}

/**
 * The echo channel responder's outbound queue.  push() inbound payloads, request(n) outbound
 * credit, inboundComplete() when the requester completes; grants inbound credit through
 * sink.requestInbound(n) in batches of `batch`.
 * sink: {next(payload, isLast), complete(), error(message), requestInbound(n)}.
 */
class EchoQueue extends OutboundDemand {
  constructor(completion, batch, sink, error) {
    super("request-channel", completion, sink, error);
    this.batch = batch;
    this.queue = [];
    this.sinceRequest = 0;
    this.inboundDone = false;
  }

  /** First payload (from REQUEST_CHANNEL); not counted against inbound credit. */
  first(payload, inboundComplete) {
    if (this.error === null) {
      this.queue.push([payload, inboundComplete && this.completion === "flag"]);
    }
    if (inboundComplete) {
      this.inboundDone = true;
      emit({ event: "channel_inbound_complete", form: "request" });
    } else if (this.error === null) {
      this.sink.requestInbound(this.batch);
    }
  }

  push(payload, isComplete) {
    emit({
      event: "channel_next",
      complete: isComplete,
      ...describePayload(payload, "both"),
    });
    if (isComplete) {
      this.inboundDone = true;
      emit({ event: "channel_inbound_complete", form: "flag" });
    }
    this.queue.push([payload, isComplete && this.completion === "flag"]);
    this.sinceRequest++;
    if (!isComplete && this.sinceRequest >= this.batch) {
      this.sinceRequest = 0;
      this.sink.requestInbound(this.batch);
    }
    this.drain();
  }

  inboundComplete() {
    if (!this.inboundDone) {
      emit({ event: "channel_inbound_complete", form: "frame" });
    }
    this.inboundDone = true;
    this.drain();
  }

  inboundError(code, message) {
    if (this.done) {
      return; // our own ERROR terminated the channel; the library echoes it to us
    }
    this.inboundDone = true;
    this.done = true;
    emit({ event: "channel_inbound_error", code, message });
  }

  drainDemand() {
    while (this.demand > 0 && this.queue.length) {
      const [payload, last] = this.queue.shift();
      this.demand--;
      if (last) {
        this.done = true;
        this.sink.next(payload, true);
        return;
      }
      this.sink.next(payload, false);
    }
    if (this.inboundDone && !this.queue.length) {
      this.done = true;
      this.sink.complete();
    }
  }
}

/**
 * Bind `server` (an rsocket-js 1.0 RSocketServer), print "LISTENING <port()>" and serve until
 * serverLifetime(options) ends: then emit "stopping", close it and exit with EXIT_OK.  A
 * failed bind finishes with failure.
 */
async function listenUntilStopped(server, port, options) {
  let closeable;
  try {
    closeable = await server.bind();
  } catch (e) {
    failure(`bind failed: ${e && e.message}`);
    return;
  }
  process.stdout.write(`LISTENING ${port()}\n`);
  serverLifetime(options, (reason) => {
    emit({ event: "stopping", reason });
    closeable.close();
    finish(EXIT_OK);
  });
}

/** The connection of `connector` (an RSocketConnector), or null after finishing with failure. */
async function connectOrFail(connector) {
  try {
    return await connector.connect();
  } catch (e) {
    failure(`connection failed: ${e && e.message}`);
    return null;
  }
}

/**
 * Requester side of a stream or channel (both js-1.0 clients): collects the payloads as
 * describe(payload), requests requestN more after every requestN received, cancels after `take`
 * (undefined: never).  start(subscriber) starts the interaction and returns its handle, which
 * collect returns; `handlers` are added to the subscriber (a channel's request/cancel of our
 * outbound side).  end({payloads, completed, cancelled}) on completion or cancel,
 * fail(error, {payloads}) on error; only the first of them is called.
 */
function collect(start, { describe, take, requestN, end, fail }, handlers) {
  const payloads = [];
  let sinceRequest = 0;
  let finished = false;
  let handle = null;
  const endWith = (extra) => {
    finished = true;
    end({ payloads, ...extra });
  };
  const subscriber = {
    onNext: (p, isComplete) => {
      if (finished) return;
      payloads.push(describe(p));
      sinceRequest++;
      if (isComplete) {
        endWith({ completed: true, cancelled: false });
      } else if (take !== undefined && payloads.length >= take) {
        handle.cancel();
        endWith({ completed: false, cancelled: true });
      } else if (sinceRequest >= requestN) {
        sinceRequest = 0;
        handle.request(requestN);
      }
    },
    onComplete: () => {
      if (!finished) endWith({ completed: true, cancelled: false });
    },
    onError: (e) => {
      if (!finished) {
        finished = true;
        fail(e, { payloads });
      }
    },
    onExtension() {},
    ...handlers,
  };
  handle = start(subscriber);
  return handle;
}

function isFinishing() {
  return finishing;
}

module.exports = {
  wsUrl,
  requireWs,
  parseArgs,
  usageError,
  listenUntilStopped,
  isFinishing,
  collect,
  connectOrFail,
  rejectRequested,
  CountEmitter,
  EchoQueue,
  serverLifetime,
  HOST,
  MAX_REQUEST_N,
  EXIT_OK,
  EXIT_RSOCKET_ERROR,
  EXIT_FAILURE,
  EXIT_UNSUPPORTED,
  parseClientArgs,
  parseServerArgs,
  finish,
  unsupported,
  failure,
  emit,
  pattern,
  toBuffer,
  describePayload,
  payloadFromOptions,
  setupPayloadFromOptions,
  setupFromOptions,
  clientOutcome,
  errorRequested,
  streamCount,
  streamRequest,
  payloadEvent,
  echoPayload,
  overallTimeout,
  errorInfo,
};
