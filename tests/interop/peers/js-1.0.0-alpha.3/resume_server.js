#!/usr/bin/env node
/*
 * rsocket-js 1.0.0-alpha.3 interop server WITH RESUME, over TCP.
 *
 *   node resume_server.js [--port P] [--host 127.0.0.1] [--session-timeout MS]
 *                         [--request-n K] [--log-keepalive] [--timeout SECONDS] [--watch-stdin]
 *
 * Prints "LISTENING <port>" once bound, then one JSON event per line:
 *   {"event": "tcp_connection", "n": N}           a TCP connection was accepted (1, 2, ...)
 *   {"event": "setup", "resume": bool, "token_b64": ..., "keepalive", "lifetime"}
 *   {"event": "resume", "version": [major, minor], "token_b64",
 *    "last_received_server_position", "first_available_client_position",
 *    "server": {"last_received", "first_available", "last_sent"}}   a RESUME arrived for a
 *                                                   known session (the library then answers)
 *   {"event": "resume_ok", "last_received_client_position": P}    RESUME_OK sent
 *   {"event": "keepalive", "respond": bool, "position": P}         (--log-keepalive only)
 *   {"event": "error_sent", "code", "message"}      ERROR on stream 0 sent by the session
 *   {"event": "stream_done", "sent": N}             request-stream completed after N items
 *   {"event": "channel_done", "echoed": N}          request-channel completed after N echoes
 *   {"event": "cancel", "interaction", "sent"}
 *   {"event": "stopping", "reason"}
 *
 * Responder:
 *   request-response  echoes the payload;
 *   request-stream    data = decimal N: emits "0" .. "N-1" as credit allows, then PAYLOAD[C];
 *   request-channel   echoes every inbound payload (the first one too) as credit allows,
 *                     grants inbound credit in batches of --request-n (default 256), completes
 *                     once the inbound side completed and everything was echoed.
 * --session-timeout MS: how long a detached session waits for RESUME (the library's
 *   `resume.sessionTimeout`; default 60000).
 * The library has no limit on its resume buffer ("TODO: add size parameter" in its source).
 */
"use strict";

const net = require("net");
const { RSocketServer } = require("rsocket-core");
const multiplexer = require("rsocket-core/dist/ClientServerMultiplexerDemultiplexer");
const { TcpServerTransport } = require("rsocket-tcp-server");
const common = require("../common.js");

const OPTIONS = {
  host: "string",
  port: "int",
  "session-timeout": "int",
  "request-n": "int",
  "log-keepalive": "bool",
  timeout: "int",
  "watch-stdin": "bool",
};

const KEEPALIVE = 0x03;
const ERROR = 0x0b;
const RESUME_OK = 0x0e;

function parse() {
  const { options, positional } = common.parseArgs(process.argv.slice(2), OPTIONS);
  if (positional.length) {
    common.failure(`usage: unexpected argument ${positional[0]}`);
  }
  options.host = options.host || common.HOST;
  options.port = options.port || 0;
  options["session-timeout"] = options["session-timeout"] || 60000;
  options["request-n"] = options["request-n"] || 256;
  options.timeout = options.timeout || 600;
  return options;
}

const options = parse();

/* Observe the library's resumable session (events only; behaviour unchanged). */
function instrument() {
  const proto = multiplexer.ResumableClientServerInputMultiplexerDemultiplexer.prototype;
  const resume = proto.resume;
  proto.resume = function (frame, outbound, closeable) {
    if (frame.type !== 0x0d) {
      return resume.call(this, frame, outbound, closeable);
    }
    common.emit({
      event: "resume",
      version: [frame.majorVersion, frame.minorVersion],
      token_b64: Buffer.from(frame.resumeToken).toString("base64"),
      last_received_server_position: frame.serverPosition,
      first_available_client_position: frame.clientPosition,
      server: {
        last_received: this.frameStore.lastReceivedFramePosition,
        first_available: this.frameStore.firstAvailableFramePosition,
        last_sent: this.frameStore.lastSentFramePosition,
      },
    });
    // watch what resume() itself sends (RESUME_OK or ERROR, then the retransmission)
    const watched = Object.create(outbound);
    watched.send = (f) => {
      if (f.type === RESUME_OK) {
        common.emit({ event: "resume_ok", last_received_client_position: f.clientPosition });
      } else if (f.type === ERROR && f.streamId === 0) {
        common.emit({ event: "error_sent", code: f.code, message: f.message });
      }
      outbound.send(f);
    };
    const result = resume.call(this, frame, watched, closeable);
    if (this.outbound === watched) {
      this.outbound = outbound;
    }
    return result;
  };
  const handle = proto.handle;
  proto.handle = function (frame) {
    if (options["log-keepalive"] && frame.type === KEEPALIVE) {
      common.emit({
        event: "keepalive",
        respond: (frame.flags & 0x80) !== 0,
        position: frame.lastReceivedPosition,
      });
    }
    return handle.call(this, frame);
  };
  const send = proto.send;
  proto.send = function (frame) {
    if (frame.type === ERROR && frame.streamId === 0) {
      common.emit({ event: "error_sent", code: frame.code, message: frame.message });
    }
    return send.call(this, frame);
  };
}

/*
 * The outbound half of a responder's stream: `flow` ({demand, done}) is shared with the
 * responder's drain(); request(n) adds demand and drains, cancel() ends it (once) with a
 * "cancel" event saying how many items were `sent()`.
 */
function outboundSubscription(flow, drain, interaction, sent) {
  return {
    request: (n) => {
      flow.demand += n;
      drain();
    },
    cancel: () => {
      if (!flow.done) {
        flow.done = true;
        common.emit({ event: "cancel", interaction, sent: sent() });
      }
    },
    onExtension() {},
  };
}

function streamResponder(payload, initialRequestN, sink) {
  const text = (common.toBuffer(payload.data) || Buffer.alloc(0)).toString("latin1");
  const count = /^\d+$/.test(text) ? parseInt(text, 10) : 10;
  let next = 0;
  const flow = { demand: 0, done: false };
  const drain = () => {
    while (!flow.done && flow.demand > 0 && next < count) {
      flow.demand--;
      sink.onNext({ data: Buffer.from(String(next++)) }, false);
    }
    if (!flow.done && next >= count) {
      flow.done = true;
      sink.onComplete();
      common.emit({ event: "stream_done", sent: next });
    }
  };
  flow.demand += initialRequestN;
  drain();
  return outboundSubscription(flow, drain, "request-stream", () => next);
}

function channelResponder(payload, initialRequestN, isCompleted, sink) {
  const batch = options["request-n"];
  const queue = [{ data: common.toBuffer(payload.data) || Buffer.alloc(0) }];
  const flow = { demand: initialRequestN, done: false };
  let inboundDone = isCompleted;
  let since = 0;
  let echoed = 0;
  const drain = () => {
    while (!flow.done && flow.demand > 0 && queue.length) {
      flow.demand--;
      echoed++;
      sink.onNext(queue.shift(), false);
    }
    if (!flow.done && inboundDone && !queue.length) {
      flow.done = true;
      sink.onComplete();
      common.emit({ event: "channel_done", echoed });
    }
  };
  if (!isCompleted) {
    sink.request(batch);
  }
  drain();
  return {
    ...outboundSubscription(flow, drain, "request-channel", () => echoed),
    onNext: (p, isComplete) => {
      queue.push({ data: common.toBuffer(p.data) || Buffer.alloc(0) });
      if (isComplete) {
        inboundDone = true;
      } else if (++since >= batch) {
        since = 0;
        sink.request(batch);
      }
      drain();
    },
    onComplete: () => {
      inboundDone = true;
      drain();
    },
    onError: () => {
      flow.done = true;
    },
  };
}

function responder() {
  return {
    fireAndForget() {
      return { cancel() {} };
    },
    requestResponse(payload, sink) {
      sink.onNext({ data: common.toBuffer(payload.data) || Buffer.alloc(0) }, true);
      return { cancel() {}, onExtension() {} };
    },
    requestStream: streamResponder,
    requestChannel: channelResponder,
  };
}

async function main() {
  instrument();
  let netServer = null;
  let connections = 0;
  const server = new RSocketServer({
    transport: new TcpServerTransport({
      listenOptions: { host: options.host, port: options.port },
      socketCreator: (serverOptions) => {
        netServer = new net.Server(serverOptions);
        netServer.on("connection", () => common.emit({ event: "tcp_connection", n: ++connections }));
        return netServer;
      },
    }),
    resume: { sessionTimeout: options["session-timeout"] },
    acceptor: {
      accept: async (setup) => {
        common.emit({
          event: "setup",
          resume: (setup.flags & 0x80) !== 0,
          token_b64: setup.resumeToken ? Buffer.from(setup.resumeToken).toString("base64") : null,
          keepalive: setup.keepAliveInterval,
          lifetime: setup.keepAliveMaxLifetime,
        });
        return responder();
      },
    },
  });
  await common.listenUntilStopped(server, () => netServer.address().port, options);
}

main();
