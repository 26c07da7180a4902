// Parses the page's server-sent-event streams off the main thread: /v1/decide's answers
// and /v1/watches/events' notifications.
//
// The page reads each response body itself (fetch + ReadableStream: the answer is a POST,
// and EventSource can neither POST nor send the key) and transfers each raw chunk here. This worker
// decodes UTF-8 across chunk boundaries, parses the SSE framing (WHATWG HTML §9.2), and
// posts back one message per chunk holding every complete event in it, so a burst of
// tokens costs the main thread one message, not one per token.
//
//   in:  {type: "chunk", stream, bytes: ArrayBuffer}   {type: "end", stream}
//   out: {type: "events", stream, events: [{event, data, id}]}   {type: "end", stream}
//
// `data` is the parsed JSON when the data lines hold JSON, else the raw text.
"use strict";

function createSseParser() {
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  let eventType = "";
  let dataLines = [];
  let lastId = "";
  let skipLeadingLf = false;

  function dispatch(out) {
    if (dataLines.length === 0) {
      eventType = "";
      return;
    }
    const text = dataLines.join("\n");
    let data = text;
    try {
      data = JSON.parse(text);
    } catch (_) {
      // not JSON: hand over the text as it is
    }
    out.push({ event: eventType || "message", data: data, id: lastId });
    eventType = "";
    dataLines = [];
  }

  function line(text, out) {
    if (text === "") {
      dispatch(out);
      return;
    }
    if (text.charCodeAt(0) === 58 /* ":" comment, e.g. keep-alive */) return;
    const colon = text.indexOf(":");
    let field = text;
    let value = "";
    if (colon >= 0) {
      field = text.slice(0, colon);
      value = text.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
    }
    if (field === "event") eventType = value;
    else if (field === "data") dataLines.push(value);
    else if (field === "id" && value.indexOf("\0") < 0) lastId = value;
    // "retry" and unknown fields are ignored: the page paces its own reconnects.
  }

  function feed(text, out) {
    buffer += text;
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer.charCodeAt(i);
      if (c === 10 /* \n */ && skipLeadingLf && i === start) {
        start = i + 1; // the \n of a \r\n split across two chunks
        skipLeadingLf = false;
        continue;
      }
      skipLeadingLf = false;
      if (c === 13 /* \r */ || c === 10) {
        line(buffer.slice(start, i), out);
        if (c === 13) {
          if (i + 1 < buffer.length) {
            if (buffer.charCodeAt(i + 1) === 10) i++;
          } else {
            skipLeadingLf = true;
          }
        }
        start = i + 1;
      }
    }
    buffer = buffer.slice(start);
  }

  return {
    push(bytes) {
      const out = [];
      feed(decoder.decode(bytes, { stream: true }), out);
      return out;
    },
    end() {
      // An event without its closing blank line is incomplete and is dropped (per spec).
      const out = [];
      feed(decoder.decode(), out);
      return out;
    },
  };
}

const parsers = new Map();

self.onmessage = (message) => {
  const { type, stream } = message.data;
  let parser = parsers.get(stream);
  if (!parser) {
    parser = createSseParser();
    parsers.set(stream, parser);
  }
  if (type === "chunk") {
    const events = parser.push(new Uint8Array(message.data.bytes));
    if (events.length) self.postMessage({ type: "events", stream, events });
  } else if (type === "end" || type === "abort") {
    const events = type === "end" ? parser.end() : [];
    parsers.delete(stream);
    if (events.length) self.postMessage({ type: "events", stream, events });
    self.postMessage({ type: "end", stream });
  }
};
