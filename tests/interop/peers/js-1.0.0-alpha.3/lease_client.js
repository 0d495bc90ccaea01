#!/usr/bin/env node
/*
 * rsocket-js 1.0.0-alpha.3 lease interop client: asks for leases (SETUP L flag) and sends
 * request-responses one after another, then prints one JSON line.
 *
 *   node lease_client.js --port P [--host 127.0.0.1] [--count K] [--wait MS]
 *                        [--max-pending N] [--timeout SECONDS]
 *
 * rsocket-js (rsocket-core/dist/RSocketSupport.js, LeaseHandler) honours leases as a client:
 * a request the current lease does not allow is queued, up to `maxPendingRequests`
 * (--max-pending, default 256 as in rsocket-js), and past that rejected at once, locally,
 * with RSocketError(REJECTED, "No available lease given").  connect() resolves before the
 * server's first LEASE arrives, so with --max-pending 0 even the first request is rejected.  It never sends a LEASE itself (its
 * responder grants nothing) and ignores the LEASE metadata.
 *
 * Sends --count (default 3) request-responses with data "0", "1", ...; each gets --wait ms
 * (default 1500) before it is reported "queued".  Output: {"peer", "results": [{index,
 * payload | error {code, message} | queued}]}, exit code 0; {"failure"} and 2 otherwise.
 */
"use strict";

const { RSocketConnector } = require("rsocket-core");
const { TcpClientTransport } = require("rsocket-tcp-client");
const common = require("../common.js");

const PEER = "rsocket-js-1.0.0-alpha.3";

function parseArgs(argv) {
  const options = { host: common.HOST, count: 3, wait: 1500, "max-pending": 256, timeout: 30 };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, "");
    if (!(name in options) && name !== "port") {
      common.failure(`usage: unknown option ${argv[i]}`);
    }
    options[name] = name === "host" ? argv[i + 1] : Number(argv[i + 1]);
  }
  if (!options.port) {
    common.failure("usage: --port is required");
  }
  return options;
}

const options = parseArgs(process.argv.slice(2));
const overall = setTimeout(() => common.failure(`timeout after ${options.timeout}s`),
                           options.timeout * 1000);
main().catch((e) => common.failure(`${e && e.stack ? e.stack : e}`));

function request(rsocket, data) {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (entry) => {
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        resolve(entry);
      }
    };
    const timer = setTimeout(() => settle({ queued: true }), options.wait);
    rsocket.requestResponse({ data: Buffer.from(data) }, {
      onNext: (p) => settle({ payload: p.data ? p.data.toString("utf8") : null }),
      onComplete: () => settle({ payload: null }),
      onError: (e) => settle({ error: common.errorInfo(e) || { failure: String(e) } }),
      onExtension() {},
    });
  });
}

async function main() {
  const connector = new RSocketConnector({
    setup: {
      keepAlive: 20000,
      lifetime: 90000,
      dataMimeType: "application/octet-stream",
      metadataMimeType: "application/octet-stream",
    },
    lease: { maxPendingRequests: options["max-pending"] },
    transport: new TcpClientTransport({
      connectionOptions: { host: options.host, port: options.port },
    }),
  });
  const rsocket = await common.connectOrFail(connector);
  if (rsocket === null) {
    return;
  }
  const results = [];
  for (let i = 0; i < options.count; i++) {
    results.push({ index: i, ...(await request(rsocket, String(i))) });
  }
  clearTimeout(overall);
  common.finish(common.EXIT_OK, { peer: PEER, results }, true);
  rsocket.close();
}
