// rsocket_tx browser example: rsocket-js 1.0.0-alpha.3 over WebSocket.
//
// Connects to ws(s)://<this page's host>/rsocket, or to the URL given by the `url` query
// parameter (index.html?url=ws://localhost:8080/rsocket). The default responder of
// `twistd rsocket` (rsocket_tx.apps.demo.DemoResponder) echoes request-response and answers a
// request-stream whose data is a count N with the items "0" .. "N-1".
import { RSocketConnector } from "rsocket-core";
import { WebsocketClientTransport } from "rsocket-websocket-client";

/** How many items the stream view asks for at a time (REQUEST_N), renewed as they arrive. */
const STREAM_WINDOW = 16;

const $ = (id) => document.getElementById(id);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

function defaultUrl(location) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/rsocket`;
}

function serverUrl() {
  return new URLSearchParams(window.location.search).get("url") || defaultUrl(window.location);
}

function text(payload) {
  return payload && payload.data ? decoder.decode(payload.data) : "";
}

function payloadOf(value) {
  return { data: Buffer.from(encoder.encode(value)) };
}

function describeError(e) {
  if (!e) return "unknown error";
  return e.message || String(e);
}

function setStatus(state, message) {
  const status = $("status");
  status.dataset.state = state;
  status.textContent = message;
  status.className = state === "error" || state === "closed" ? "error" : "";
}

function setOutput(element, state, message) {
  element.dataset.state = state;
  element.textContent = message;
  element.className = state === "error" ? "error" : "";
}

function requestResponse(rsocket) {
  const output = $("rr-response");
  setOutput(output, "pending", "…");
  rsocket.requestResponse(payloadOf($("rr-input").value), {
    onNext(payload) {
      setOutput(output, "done", text(payload));
    },
    onComplete() {
      setOutput(output, "done", "");
    },
    onError(e) {
      setOutput(output, "error", `error: ${describeError(e)}`);
    },
    onExtension() {},
  });
}

let activeStream = null;

function startStream(rsocket) {
  if (activeStream) activeStream.cancel();
  const items = $("stream-items");
  const status = $("stream-status");
  const cancel = $("stream-cancel");
  items.replaceChildren();
  setOutput(status, "streaming", "streaming…");
  let outstanding = STREAM_WINDOW;
  let received = 0;
  const finish = (state, message) => {
    activeStream = null;
    cancel.disabled = true;
    setOutput(status, state, message);
  };
  const handle = rsocket.requestStream(payloadOf($("stream-input").value), STREAM_WINDOW, {
    onNext(payload, isComplete) {
      const li = document.createElement("li");
      li.textContent = text(payload);
      items.appendChild(li);
      items.scrollTop = items.scrollHeight;
      received += 1;
      outstanding -= 1;
      if (isComplete) {
        finish("complete", `complete: ${received} items`);
      } else if (outstanding <= STREAM_WINDOW / 2) {
        handle.request(STREAM_WINDOW - outstanding);
        outstanding = STREAM_WINDOW;
      }
    },
    onComplete() {
      finish("complete", `complete: ${received} items`);
    },
    onError(e) {
      finish("error", `error: ${describeError(e)}`);
    },
    onExtension() {},
  });
  activeStream = {
    cancel() {
      handle.cancel();
      finish("canceled", `canceled after ${received} items`);
    },
  };
  cancel.disabled = false;
}

async function main() {
  const url = serverUrl();
  $("url").textContent = url;
  const connector = new RSocketConnector({
    setup: {
      dataMimeType: "text/plain",
      metadataMimeType: "text/plain",
      keepAlive: 20000,
      lifetime: 90000,
    },
    transport: new WebsocketClientTransport({ url }),
  });
  let rsocket;
  try {
    rsocket = await connector.connect();
  } catch (e) {
    // a failed WebSocket handshake rejects with the error event's (undefined) `error`
    setStatus("error", `connection failed: ${e ? describeError(e) : `could not open ${url}`}`);
    return;
  }
  setStatus("connected", "connected");
  rsocket.onClose((e) => {
    setStatus("closed", e ? `connection closed: ${describeError(e)}` : "connection closed");
    for (const id of ["rr-send", "stream-start", "stream-cancel"]) $(id).disabled = true;
  });
  $("rr-form").addEventListener("submit", (event) => {
    event.preventDefault();
    requestResponse(rsocket);
  });
  $("stream-form").addEventListener("submit", (event) => {
    event.preventDefault();
    startStream(rsocket);
  });
  $("stream-cancel").addEventListener("click", () => {
    if (activeStream) activeStream.cancel();
  });
  $("rr-send").disabled = false;
  $("stream-start").disabled = false;
}

main();
