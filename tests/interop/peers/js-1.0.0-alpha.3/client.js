#!/usr/bin/env node
/*
 * rsocket-js 1.0.0-alpha.3 interop client: runs ONE interaction, prints the result as JSON.
 *
 *   node client.js INTERACTION --port P [--host 127.0.0.1]
 *       [--data S | --data-b64 B | --data-size N] [--metadata S | --metadata-b64 B |
 *       --metadata-size N] [--request-n K] [--take M] [--count N] [--fragment N]
 *       [--completion flag|frame] [--digest] [--timeout SECONDS] [--keepalive MS] [--lifetime MS]
 *       [--setup-data S] [--setup-metadata S] [--transport tcp|ws] [--path /P]
 *
 * Exit codes: 0 ok, 1 the peer sent an RSocket ERROR, 2 local failure/timeout,
 * 3 unsupported by this library (metadata-push: RSocketRequester.metadataPush throws
 * "Method not implemented.").
 * --fragment N = maxOutboundFragmentSize: payload bytes per fragment (data + metadata +
 *   3-byte metadata length + 4-byte initial request n on REQUEST_STREAM/CHANNEL), not counting
 *   the 6-byte frame header nor the 3-byte length prefix.
 * --completion (channel, default "frame"): "flag" = C on the last PAYLOAD (or on
 *   REQUEST_CHANNEL when --count 1), "frame" = a separate PAYLOAD with only C.
 */
"use strict";

const { RSocketConnector } = require("rsocket-core");
const { TcpClientTransport } = require("rsocket-tcp-client");
const { WebsocketClientTransport } = require("rsocket-websocket-client");
const common = require("../common.js");

const options = common.parseClientArgs(process.argv.slice(2));
const completion = options.completion || "frame";
const PEER = "rsocket-js-1.0.0-alpha.3";

if (options.interaction === "metadata-push") {
  common.unsupported(
    "rsocket-js 1.0.0-alpha.3 cannot send METADATA_PUSH: " +
      'RSocketRequester.metadataPush throws "Method not implemented."',
  );
} else {
  common.overallTimeout(options.timeout, options.interaction);
  main().catch((e) => common.failure(`${e && e.stack ? e.stack : e}`));
}

/** --transport tcp: rsocket-tcp-client; ws: rsocket-websocket-client at ws://HOST:PORT/PATH
 *  over the "ws" package's WebSocket (Node 20 has no global WebSocket). */
function makeTransport() {
  if (options.transport === "ws") {
    const WebSocket = common.requireWs(__dirname);
    return new WebsocketClientTransport({
      url: common.wsUrl(options),
      wsCreator: (url) => new WebSocket(url),
    });
  }
  return new TcpClientTransport({
    connectionOptions: { host: options.host, port: options.port },
  });
}

function result(extra) {
  return { peer: PEER, interaction: options.interaction, ...extra };
}

async function main() {
  const connector = new RSocketConnector({
    setup: common.setupFromOptions(options),
    fragmentation:
      options.fragment !== undefined ? { maxOutboundFragmentSize: options.fragment } : undefined,
    transport: makeTransport(),
  });
  const rsocket = await common.connectOrFail(connector);
  if (rsocket === null) {
    return;
  }
  const { done, fail, closedBy } = common.clientOutcome(result, () => rsocket.close());
  rsocket.onClose((e) => {
    if (e) {
      closedBy(e);
    } else {
      done(common.EXIT_FAILURE, result({ failure: "connection closed" }));
    }
  });
  const payload = common.payloadFromOptions(options);

  switch (options.interaction) {
    case "request-response":
      rsocket.requestResponse(payload, {
        onNext: (p) =>
          done(common.EXIT_OK, result({ payload: common.describePayload(p, options.mode) })),
        onComplete: () => done(common.EXIT_OK, result({ payload: null })),
        onError: (e) => fail(e, {}),
        onExtension() {},
      });
      break;
    case "fire-and-forget":
      rsocket.fireAndForget(payload, {
        // called right after the frame(s) were handed to the socket; close() flushes (end())
        onComplete: () => done(common.EXIT_OK, result({ sent: true })),
        onError: (e) => fail(e, {}),
      });
      break;
    case "request-stream":
      collect((subscriber) =>
        rsocket.requestStream(payload, options["request-n"], subscriber),
      );
      break;
    case "request-channel":
      channel(payload.metadata);
      break;
  }

  function collect(start, handlers) {
    return common.collect(start, {
      describe: (p) => common.describePayload(p, options.mode),
      take: options.take,
      requestN: options["request-n"],
      end: (extra) => done(common.EXIT_OK, result(extra)),
      fail,
    }, handlers);
  }

  function channel(metadata) {
    // outbound: "0" travels in REQUEST_CHANNEL, "1".."count-1" as the responder grants credit
    let next = 1;
    let outboundDone = false;
    const count = options.count;
    let handle = null;
    const outbound = (p) => (metadata !== undefined ? { ...p, metadata } : p);
    const send = (n) => {
      while (n > 0 && next < count && !outboundDone) {
        const last = next === count - 1;
        const p = outbound({ data: Buffer.from(String(next)) });
        next++;
        n--;
        if (last && completion === "flag") {
          outboundDone = true;
          handle.onNext(p, true);
          return;
        }
        handle.onNext(p, false);
      }
      if (next >= count && !outboundDone) {
        outboundDone = true;
        handle.onComplete();
      }
    };
    const firstCompletes = count === 1 && completion === "flag";
    handle = collect(
      (subscriber) =>
        rsocket.requestChannel(
          outbound({ data: Buffer.from("0") }),
          options["request-n"],
          firstCompletes,
          subscriber,
        ),
      {
        // the responder asks for more of our payloads / cancels our outbound side
        request: (n) => send(n),
        cancel: () => {
          outboundDone = true;
        },
      },
    );
    if (firstCompletes) {
      outboundDone = true;
    } else if (count === 1) {
      handle.onComplete(); // completion needs no credit
    }
  }
}
