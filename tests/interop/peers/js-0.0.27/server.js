#!/usr/bin/env node
/*
 * rsocket-js 0.0.27 interop server: the demo responder over TCP (BufferEncoders, binary safe).
 *
 *   node server.js [--port P] [--host 127.0.0.1] [--request-n K] [--timeout SECONDS]
 *                  [--watch-stdin] [--transport tcp|ws]
 *
 * Prints "LISTENING <port>" once bound, then JSON events, one per line (see ../README.md).
 * Refused with exit 3 (the library cannot do it):
 *   --fragment N       rsocket-js 0.0.27 never fragments (it only reassembles what it receives);
 *   --completion flag  the library always ends streams/channels with a separate PAYLOAD[C]
 *                      (request-response is always PAYLOAD[N|C]).
 * --transport ws: rsocket-websocket-server (a ws 7.5.14 server, any URL path).
 * Response metadata cannot be echoed: RSocketMachine._sendStreamPayload never sets the M flag,
 * so whatever metadata the handler returns is dropped from the frame.
 */
"use strict";

const net = require("net");
const { RSocketServer, BufferEncoders } = require("rsocket-core");
const RSocketTCPServer = require("rsocket-tcp-server").default;
const RSocketWebSocketServer = require("rsocket-websocket-server").default;
const { Flowable, Single } = require("rsocket-flowable");
const common = require("../common.js");

const options = common.parseServerArgs(process.argv.slice(2));

if (options.fragment !== undefined) {
  common.unsupported("rsocket-js 0.0.27 cannot fragment (it only reassembles inbound fragments)");
} else if (options.completion === "flag") {
  common.unsupported(
    "rsocket-js 0.0.27 always completes streams and channels with a separate PAYLOAD[C] frame",
  );
} else {
  main();
}

function responder() {
  return {
    fireAndForget(payload) {
      common.payloadEvent("fnf", payload);
    },

    metadataPush(payload) {
      const described = common.describePayload({ data: null, metadata: payload.metadata }, "both");
      common.emit({
        event: "metadata_push",
        metadata: described.metadata,
        metadata_len: described.metadata_len,
        metadata_sha256: described.metadata_sha256,
      });
      return Single.of(null);
    },

    requestResponse(payload) {
      common.payloadEvent("request", payload, { interaction: "request-response" });
      const error = common.errorRequested(payload.data);
      if (error !== null) {
        return Single.error(new Error(error));
      }
      return Single.of(common.echoPayload(payload));
    },

    requestStream(payload) {
      common.payloadEvent("request", payload, { interaction: "request-stream" });
      const { count, error } = common.streamRequest(payload.data);
      return new Flowable((subscriber) => {
        const emitter = new common.CountEmitter(
          count,
          "frame",
          {
            next: (p) => subscriber.onNext(p),
            complete: () => subscriber.onComplete(),
            error: (message) => subscriber.onError(new Error(message)),
          },
          error,
        );
        subscriber.onSubscribe({
          request: (n) => emitter.request(n),
          cancel: () => emitter.cancel(),
        });
      });
    },

    requestChannel(inbound) {
      // `inbound` yields the REQUEST_CHANNEL payload first, then the following PAYLOADs.
      // The library requests our outbound credit (frame.requestN) as soon as it subscribes,
      // i.e. before the first inbound payload reached us: such requests wait in `pending`.
      return new Flowable((subscriber) => {
        let inboundSubscription = null;
        let queue = null;
        const pending = [];
        let cancelledEarly = false;
        const sink = {
          next: (p) => subscriber.onNext(common.echoPayload(p)),
          complete: () => subscriber.onComplete(),
          error: (message) => subscriber.onError(new Error(message)),
          requestInbound: (n) => inboundSubscription.request(n),
        };
        subscriber.onSubscribe({
          request: (n) => (queue ? queue.request(n) : pending.push(n)),
          cancel: () => (queue ? queue.cancel() : (cancelledEarly = true)),
        });
        inbound.subscribe({
          onSubscribe: (subscription) => {
            inboundSubscription = subscription;
            // the first request(n) releases the REQUEST_CHANNEL payload and sends
            // REQUEST_N(n - 1); request(1) therefore sends nothing
            subscription.request(1);
          },
          onNext: (p) => {
            if (queue !== null) {
              queue.push(p, false);
              return;
            }
            common.payloadEvent("request", p, { interaction: "request-channel" });
            queue = new common.EchoQueue(
              "frame",
              options["request-n"],
              sink,
              common.errorRequested(p.data),
            );
            queue.first(p, false);
            pending.splice(0).forEach((n) => queue.request(n));
            if (cancelledEarly) queue.cancel();
          },
          onComplete: () => queue && queue.inboundComplete(),
          onError: (e) => {
            const info = common.errorInfo(e) || { code: null, message: String(e && e.message) };
            if (queue) queue.inboundError(info.code, info.message);
          },
        });
      });
    },
  };
}

function makeTransport() {
  if (options.transport === "ws") {
    // the ws version the library depends on (7.5.14)
    const WebSocket = common.requireWs(__dirname, "rsocket-websocket-server");
    return new RSocketWebSocketServer(
      { host: options.host, port: options.port },
      BufferEncoders,
      (serverOptions) => {
        const wss = new WebSocket.Server(serverOptions);
        wss.on("listening", () => {
          process.stdout.write(`LISTENING ${wss.address().port}\n`);
        });
        wss.on("error", (e) => common.failure(`listen failed: ${e.message}`));
        return wss;
      },
    );
  }
  let netServer = null;
  return new RSocketTCPServer(
    {
      host: options.host,
      port: options.port,
      serverFactory: (onConnect) => {
        netServer = net.createServer(onConnect);
        netServer.on("listening", () => {
          process.stdout.write(`LISTENING ${netServer.address().port}\n`);
        });
        netServer.on("error", (e) => common.failure(`listen failed: ${e.message}`));
        return netServer;
      },
    },
    BufferEncoders,
  );
}

function main() {
  const transport = makeTransport();
  const server = new RSocketServer({
    transport,
    getRequestHandler: (socket, setupPayload) => {
      common.emit({ event: "setup", ...common.describePayload(setupPayload, "both") });
      const rejection = common.rejectRequested(setupPayload);
      if (rejection !== null) {
        common.emit({ event: "setup_rejected", message: rejection });
        throw new Error(rejection); // the library answers ERROR[REJECTED_SETUP] with it
      }
      return responder();
    },
    errorHandler: (e) => common.emit({ event: "connection_error", message: String(e && e.message) }),
  });
  server.start();
  common.serverLifetime(options, (reason) => {
    common.emit({ event: "stopping", reason });
    server.stop();
    common.finish(common.EXIT_OK);
  });
}
