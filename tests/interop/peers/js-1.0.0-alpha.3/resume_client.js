#!/usr/bin/env node
/*
 * rsocket-js 1.0.0-alpha.3 interop client WITH RESUME: one request-stream or request-channel
 * of N items, checked item by item, surviving transport failures by resuming.
 *
 *   node resume_client.js request-stream|request-channel --port P [--host 127.0.0.1]
 *       [--count N] [--request-n K] [--keepalive MS] [--lifetime MS]
 *       [--reconnect-delay MS] [--max-reconnects N] [--token-b64 B] [--timeout SECONDS]
 *
 * request-stream:  sends REQUEST_STREAM with data = decimal N; expects "0" .. "N-1".
 * request-channel: sends "0" .. "N-1" ("0" in REQUEST_CHANNEL, the rest as the responder
 *                  grants credit, then PAYLOAD[C]); expects the same N items echoed back.
 * --request-n K: credit batch (default 256): K at first, K more after every K received.
 * The client reconnects to the same host:port after every transport failure (the library's
 * `resume.reconnectFunction`), waiting --reconnect-delay ms (default 50) first, at most
 * --max-reconnects times in a row (default 100), then gives up. --token-b64: the resume
 * token (default 16 random bytes). Keepalive / lifetime default 1000 / 20000 ms.
 *
 * Prints one JSON line and exits:
 *   0  {"peer", "interaction", "count", "received", "in_order": true, "completed": true,
 *       "reconnect_attempts": R, "token_b64"}
 *   1  the same keys plus "error": {"code", "message"}: the session ended with an RSocket error
 *      (e.g. 0x4 REJECTED_RESUME), or the items were wrong ("in_order": false, "first_bad":
 *      {"index", "data"}) or the stream ended early ("completed": false)
 *   2  {"failure": "..."}: usage, connection failure, timeout
 */
"use strict";

const crypto = require("crypto");
const { RSocketConnector } = require("rsocket-core");
const { TcpClientTransport } = require("rsocket-tcp-client");
const common = require("../common.js");

const PEER = "rsocket-js-1.0.0-alpha.3";
const OPTIONS = {
  host: "string",
  port: "int",
  count: "int",
  "request-n": "int",
  keepalive: "int",
  lifetime: "int",
  "reconnect-delay": "int",
  "max-reconnects": "int",
  "token-b64": "string",
  timeout: "int",
};

function parse(argv) {
  const { options, positional } = common.parseArgs(argv, OPTIONS);
  if (positional.length !== 1 || !["request-stream", "request-channel"].includes(positional[0])) {
    common.usageError("one interaction expected: request-stream or request-channel");
  }
  if (options.port === undefined) {
    common.usageError("--port is required");
  }
  options.interaction = positional[0];
  options.host = options.host || common.HOST;
  options.count = options.count === undefined ? 1000 : options.count;
  options["request-n"] = options["request-n"] || 256;
  options.keepalive = options.keepalive || 1000;
  options.lifetime = options.lifetime || 20000;
  options["reconnect-delay"] =
    options["reconnect-delay"] === undefined ? 50 : options["reconnect-delay"];
  options["max-reconnects"] = options["max-reconnects"] || 100;
  options.timeout = options.timeout || 60;
  return options;
}

let parsed = null;
try {
  parsed = parse(process.argv.slice(2));
} catch (e) {
  // a usage error: common.usageError has already finished with EXIT_FAILURE
}
if (parsed !== null) {
  common.overallTimeout(parsed.timeout, parsed.interaction);
  main(parsed).catch((e) => common.failure(`${e && e.stack ? e.stack : e}`));
}

async function main(options) {
  const token = options["token-b64"]
    ? Buffer.from(options["token-b64"], "base64")
    : crypto.randomBytes(16);
  let attempts = 0;
  const connector = new RSocketConnector({
    setup: {
      keepAlive: options.keepalive,
      lifetime: options.lifetime,
      dataMimeType: "application/octet-stream",
      metadataMimeType: "application/octet-stream",
    },
    resume: {
      tokenGenerator: () => token,
      reconnectFunction: (attempt) =>
        new Promise((resolve, reject) => {
          attempts++;
          if (attempt >= options["max-reconnects"]) {
            reject(new Error(`gave up after ${attempt} reconnection attempts`));
          } else {
            setTimeout(resolve, options["reconnect-delay"]);
          }
        }),
    },
    transport: new TcpClientTransport({
      connectionOptions: { host: options.host, port: options.port },
    }),
  });
  const rsocket = await common.connectOrFail(connector);
  if (rsocket === null) {
    return;
  }

  const count = options.count;
  const batch = options["request-n"];
  let received = 0;
  let firstBad = null;
  let finished = false;
  const report = (code, extra) => {
    if (finished) return;
    finished = true;
    // exit as soon as the line is out: closing the requester would only make the library
    // resume (it reconnects whenever its transport closes, even on a local close)
    common.finish(code, {
      peer: PEER,
      interaction: options.interaction,
      count,
      received,
      in_order: firstBad === null,
      reconnect_attempts: attempts,
      token_b64: token.toString("base64"),
      ...extra,
    });
  };
  // rsocket.onClose() is the FIRST transport's close (it fires at the first cut); the resumable
  // session is the connection's multiplexer, which closes when resumption ends for good
  rsocket.connection.multiplexerDemultiplexer.onClose((e) => {
    report(common.EXIT_RSOCKET_ERROR, {
      completed: false,
      first_bad: firstBad,
      error: common.errorInfo(e) || { code: null, message: String((e && e.message) || "closed") },
    });
  });

  let handle = null;
  let since = 0;
  const subscriber = {
    onNext: (p, isComplete) => {
      const data = (common.toBuffer(p.data) || Buffer.alloc(0)).toString("latin1");
      if (firstBad === null && data !== String(received)) {
        firstBad = { index: received, data };
      }
      received++;
      if (isComplete) {
        subscriber.onComplete();
      } else if (++since >= batch) {
        since = 0;
        handle.request(batch);
      }
    },
    onComplete: () => {
      const ok = firstBad === null && received === count;
      report(ok ? common.EXIT_OK : common.EXIT_RSOCKET_ERROR, { completed: true, first_bad: firstBad });
    },
    onError: (e) => {
      report(common.EXIT_RSOCKET_ERROR, {
        completed: false,
        first_bad: firstBad,
        error: common.errorInfo(e) || { code: null, message: String(e && e.message) },
      });
    },
    onExtension() {},
  };

  if (options.interaction === "request-stream") {
    handle = rsocket.requestStream({ data: Buffer.from(String(count)) }, batch, subscriber);
    return;
  }
  // request-channel: "0" in REQUEST_CHANNEL, then "1".."count-1" as credit arrives
  let next = 1;
  let outboundDone = false;
  const send = (n) => {
    while (n > 0 && next < count && !outboundDone) {
      handle.onNext({ data: Buffer.from(String(next++)) }, false);
      n--;
    }
    if (next >= count && !outboundDone) {
      outboundDone = true;
      handle.onComplete();
    }
  };
  subscriber.request = (n) => send(n);
  subscriber.cancel = () => {
    outboundDone = true;
  };
  handle = rsocket.requestChannel({ data: Buffer.from("0") }, batch, false, subscriber);
  if (count === 1) {
    outboundDone = true;
    handle.onComplete();
  }
}
