#!/usr/bin/env node
/*
 * rsocket-js 0.0.27 interop client: runs ONE interaction, prints the result as JSON.
 * Uses BufferEncoders so data and metadata are binary safe.
 *
 *   node client.js INTERACTION --port P [--host 127.0.0.1]
 *       [--data S | --data-b64 B | --data-size N] [--metadata S | --metadata-b64 B |
 *       --metadata-size N] [--request-n K] [--take M] [--count N]
 *       [--digest] [--timeout SECONDS] [--keepalive MS] [--lifetime MS]
 *       [--setup-data S] [--setup-metadata S] [--transport tcp|ws] [--path /P]
 *
 * Exit codes: 0 ok, 1 the peer sent an RSocket ERROR, 2 local failure/timeout,
 * 3 unsupported by this library: --fragment (0.0.27 never fragments) and
 * --completion flag on request-channel (it always completes with a separate PAYLOAD[C]).
 * metadata-push is sent WITHOUT the M flag (library behaviour, kept on purpose).
 * request-response: a PAYLOAD[C] without N (empty completion) never resolves the library's
 * Single; this client then ends with a timeout failure (exit 2).
 */
"use strict";

const { RSocketClient, BufferEncoders } = require("rsocket-core");
const RSocketTcpClient = require("rsocket-tcp-client").default;
const RSocketWebSocketClient = require("rsocket-websocket-client").default;
const { Flowable } = require("rsocket-flowable");
const common = require("../common.js");

const options = common.parseClientArgs(process.argv.slice(2));
const PEER = "rsocket-js-0.0.27";

if (options.fragment !== undefined) {
  common.unsupported("rsocket-js 0.0.27 cannot fragment (it only reassembles inbound fragments)");
} else if (options.interaction === "request-channel" && options.completion === "flag") {
  common.unsupported(
    "rsocket-js 0.0.27 always completes a channel with a separate PAYLOAD[C] frame",
  );
} else {
  common.overallTimeout(options.timeout, options.interaction);
  main();
}

function result(extra) {
  return { peer: PEER, interaction: options.interaction, ...extra };
}

/** --transport tcp: rsocket-tcp-client; ws: rsocket-websocket-client at ws://HOST:PORT/PATH
 *  over the "ws" package's WebSocket (Node 20 has no global WebSocket). */
function makeTransport() {
  if (options.transport === "ws") {
    const WebSocket = common.requireWs(__dirname);
    return new RSocketWebSocketClient(
      { url: common.wsUrl(options), wsCreator: (url) => new WebSocket(url) },
      BufferEncoders,
    );
  }
  return new RSocketTcpClient({ host: options.host, port: options.port }, BufferEncoders);
}

function main() {
  const client = new RSocketClient({
    setup: common.setupFromOptions(options),
    transport: makeTransport(),
  });
  client.connect().subscribe({
    onComplete: (socket) => run(client, socket),
    onError: (e) => common.failure(`connection failed: ${e && e.message}`),
  });
}

function run(client, socket) {
  const { done, fail, closedBy } = common.clientOutcome(result, () => client.close());
  socket.connectionStatus().subscribe({
    onNext: (status) => {
      if (status.kind === "ERROR") {
        closedBy(status.error);
      } else if (status.kind === "CLOSED") {
        done(common.EXIT_FAILURE, result({ failure: "connection closed" }));
      }
    },
    onSubscribe: (subscription) => subscription.request(Number.MAX_SAFE_INTEGER),
  });
  const payload = common.payloadFromOptions(options);

  switch (options.interaction) {
    case "request-response":
      socket.requestResponse(payload).subscribe({
        onComplete: (p) =>
          done(common.EXIT_OK, result({ payload: common.describePayload(p, options.mode) })),
        onError: (e) => fail(e, {}),
      });
      break;
    case "fire-and-forget":
      socket.fireAndForget(payload); // written synchronously; close() ends the socket gracefully
      done(common.EXIT_OK, result({ sent: true }));
      break;
    case "metadata-push":
      socket.metadataPush({ data: null, metadata: payload.metadata || Buffer.alloc(0) }).subscribe({
        onComplete: () => done(common.EXIT_OK, result({ sent: true })),
        onError: (e) => fail(e, {}),
      });
      break;
    case "request-stream":
      collect(socket.requestStream(payload));
      break;
    case "request-channel":
      collect(socket.requestChannel(outbound(payload.metadata)));
      break;
  }

  function collect(flowable) {
    const payloads = [];
    let sinceRequest = 0;
    let finished = false;
    let subscription = null;
    const batch = Math.min(options["request-n"], common.MAX_REQUEST_N);
    flowable.subscribe({
      onSubscribe: (s) => {
        subscription = s;
        s.request(batch);
      },
      onNext: (p) => {
        if (finished) return;
        payloads.push(common.describePayload(p, options.mode));
        sinceRequest++;
        if (options.take !== undefined && payloads.length >= options.take) {
          finished = true;
          subscription.cancel();
          done(common.EXIT_OK, result({ payloads, completed: false, cancelled: true }));
        } else if (sinceRequest >= batch) {
          sinceRequest = 0;
          subscription.request(batch);
        }
      },
      onComplete: () => {
        if (finished) return;
        finished = true;
        done(common.EXIT_OK, result({ payloads, completed: true, cancelled: false }));
      },
      onError: (e) => {
        if (finished) return;
        finished = true;
        fail(e, { payloads });
      },
    });
  }

  /* "0" .. "count-1"; the library sends the first in REQUEST_CHANNEL, asks for it with
     request(1), and asks for more when the responder sends REQUEST_N. */
  function outbound(metadata) {
    return new Flowable((subscriber) => {
      let next = 0;
      let finished = false;
      subscriber.onSubscribe({
        request: (n) => {
          while (n > 0 && next < options.count && !finished) {
            const p = { data: Buffer.from(String(next)) };
            if (metadata !== undefined) p.metadata = metadata;
            next++;
            n--;
            subscriber.onNext(p);
          }
          if (next >= options.count && !finished) {
            finished = true;
            subscriber.onComplete();
          }
        },
        cancel: () => {
          finished = true;
        },
      });
    });
  }
}
