#!/usr/bin/env node
/*
 * rsocket-js 1.0.0-alpha.3 interop server: the demo responder over TCP.
 *
 *   node server.js [--port P] [--host 127.0.0.1] [--completion flag|frame] [--request-n K]
 *                  [--timeout SECONDS] [--watch-stdin] [--transport tcp|ws]
 *
 * Prints "LISTENING <port>" once bound, then JSON events, one per line (see ../README.md).
 * --completion: how streams/channels end; "frame" (default) = separate PAYLOAD with only C,
 *   "flag" = C on the last PAYLOAD.  --request-n K: channel inbound credit batch (default 256).
 * --fragment is refused (exit 3): this library only fragments as a requester (its responder
 *   streams are created with fragment size 0, whatever the server config says).
 * Metadata is echoed on request-response and request-channel.
 * --transport ws: rsocket-websocket-server (a ws 8.2.3 server, any URL path; the library reads
 *   the messages through ws.createWebSocketStream).
 * Known library behaviour: the process crashes if the first TCP read of a connection holds
 * less than a complete SETUP frame; receiving METADATA_PUSH is ignored by the library (the
 * metadataPush handler is never called), so no metadata_push event can be printed.
 */
"use strict";

const net = require("net");
const { RSocketServer } = require("rsocket-core");
const { TcpServerTransport } = require("rsocket-tcp-server");
const { WebsocketServerTransport } = require("rsocket-websocket-server");
const common = require("../common.js");

const options = common.parseServerArgs(process.argv.slice(2));
const completion = options.completion || "frame";

if (options.fragment !== undefined) {
  common.unsupported(
    "rsocket-js 1.0.0-alpha.3 cannot fragment responses: DefaultStreamRequestHandler is " +
      "built with fragment size 0; only the requester side fragments",
  );
} else {
  main();
}

function responder() {
  return {
    fireAndForget(payload, responderStream) {
      common.payloadEvent("fnf", payload);
      return { cancel() {} };
    },

    requestResponse(payload, responderStream) {
      common.payloadEvent("request", payload, { interaction: "request-response" });
      const error = common.errorRequested(payload.data);
      if (error !== null) {
        responderStream.onError(new Error(error));
      } else {
        responderStream.onNext(common.echoPayload(payload), true);
      }
      return { cancel() {}, onExtension() {} };
    },

    requestStream(payload, initialRequestN, responderStream) {
      common.payloadEvent("request", payload, { interaction: "request-stream" });
      const { count, error } = common.streamRequest(payload.data);
      const emitter = new common.CountEmitter(
        count,
        completion,
        {
          next: (p, last) => responderStream.onNext(p, last),
          complete: () => responderStream.onComplete(),
          error: (message) => responderStream.onError(new Error(message)),
        },
        error,
      );
      emitter.request(initialRequestN);
      return {
        request: (n) => emitter.request(n),
        cancel: () => emitter.cancel(),
        onExtension() {},
      };
    },

    requestChannel(payload, initialRequestN, isCompleted, responderStream) {
      common.payloadEvent("request", payload, {
        interaction: "request-channel",
        complete: isCompleted,
      });
      const queue = new common.EchoQueue(
        completion,
        options["request-n"],
        {
          next: (p, last) => responderStream.onNext(common.echoPayload(p), last),
          complete: () => responderStream.onComplete(),
          error: (message) => responderStream.onError(new Error(message)),
          requestInbound: (n) => responderStream.request(n),
        },
        common.errorRequested(payload.data),
      );
      // synchronously: a PAYLOAD[C] in the same TCP read is handled right after we return
      queue.first(payload, isCompleted);
      queue.request(initialRequestN);
      return {
        onNext: (p, isComplete) => queue.push(p, isComplete),
        onComplete: () => queue.inboundComplete(),
        onError: (e) => {
          const info = common.errorInfo(e) || { code: null, message: String(e && e.message) };
          queue.inboundError(info.code, info.message);
        },
        request: (n) => queue.request(n),
        cancel: () => queue.cancel(),
        onExtension() {},
      };
    },

    metadataPush(metadata, responderStream) {
      // never called by 1.0.0-alpha.3 (DefaultConnectionFrameHandler drops METADATA_PUSH)
      common.emit({ event: "metadata_push", ...metadataOnly(metadata) });
    },
  };
}

function metadataOnly(metadata) {
  const described = common.describePayload({ data: null, metadata }, "both");
  return {
    metadata: described.metadata,
    metadata_len: described.metadata_len,
    metadata_sha256: described.metadata_sha256,
  };
}

async function main() {
  let netServer = null;
  let transport;
  if (options.transport === "ws") {
    // the ws version the library depends on (8.2.3), so createWebSocketStream matches it
    const WebSocket = common.requireWs(__dirname, "rsocket-websocket-server");
    transport = new WebsocketServerTransport({
      host: options.host,
      port: options.port,
      wsCreator: (serverOptions) => {
        netServer = new WebSocket.Server({ host: serverOptions.host, port: serverOptions.port });
        return netServer;
      },
    });
  } else {
    transport = new TcpServerTransport({
      listenOptions: { host: options.host, port: options.port },
      socketCreator: (serverOptions) => {
        netServer = new net.Server(serverOptions);
        return netServer;
      },
    });
  }
  const server = new RSocketServer({
    transport,
    acceptor: {
      accept: async (setup, remotePeer) => {
        common.emit({
          event: "setup",
          keepalive: setup.keepAliveInterval,
          lifetime: setup.keepAliveMaxLifetime,
          data_mime_type: setup.dataMimeType,
          metadata_mime_type: setup.metadataMimeType,
          flags: setup.flags,
          ...common.describePayload(setup, "both"),
        });
        const rejection = common.rejectRequested(setup);
        if (rejection !== null) {
          common.emit({ event: "setup_rejected", message: rejection });
          throw new Error(rejection); // the library answers ERROR[REJECTED_SETUP] with it
        }
        return responder();
      },
    },
  });
  await common.listenUntilStopped(server, () => netServer.address().port, options);
}
