// The page's end of the browser wire (docs/protocol.md, "The browser wire"),
// apart from drawing and the DOM: one WebSocket at a time, reconnecting with
// back-off (reset only by a welcome: a socket that opens and is refused keeps
// backing off); the hello with the session's resume token; numbered messages
// kept until the hub acknowledges them and sent again after a reconnect
// (numbered from 1 again when the welcome starts a new session); touches and
// batches in the wire the welcome names (packed2, packed, binary or JSON). What
// arrives goes to the handlers the page gives.
import { encodeTouch, decodeFrame, frames, TouchChains, decodePackedBatch, packedSequence } from './wire.js';

export const WIRES = ['json', 'binary', 'packed', 'packed2'];

export class Connection {
  // url: the WebSocket's; board: the replica packed batches are read against;
  // boardName: where the resume token is kept (per tab and board);
  // wire: the one the hello asks for; hello(): the hello's other fields;
  // handlers: welcome(message, renumbered: Map from old to new numbers, or
  // null), message(message) for everything else but acks, batch(batch, bytes),
  // acknowledged(through, now), closed().
  constructor({ url, board, boardName, wire = 'packed2', hello, handlers }) {
    this.url = url;
    this.board = board;
    this.wire = wire;
    this.hello = hello;
    this.handlers = handlers;
    this.resumeKey = 'touchsync-resume-' + boardName;
    this.resume = sessionStorage.getItem(this.resumeKey);
    this.pending = [];       // numbered messages the hub has not acknowledged, oldest first
    this.nextNumber = 1;
    this.acked = 0;
    this.rtt = [];           // ms from the last transmission to the ack, recent ones
    this.socket = null;
    this.sockets = 0;
    this.welcomed = false;   // this socket's welcome let numbered messages go (not a watcher's)
    this.spoken = 'json';    // the wire the welcome named
    this.chains = new TouchChains();
    this.backoff = 250;
    this.held = false;       // a test holds the page offline until reconnect()
    this.ended = false;      // refused for good: reconnecting would be refused again
  }

  get open() { return this.socket !== null && this.socket.readyState === WebSocket.OPEN; }

  // Numbers `message` and keeps it until the hub acknowledges it; sent now when welcomed. Its number.
  post(message) {
    message.n = this.nextNumber++;
    this.pending.push(message);
    if (this.welcomed) this.transmit(message);
    return message.n;
  }

  // A message without a number (resync, name, bye), when the socket is open.
  send(message) { if (this.open) this.socket.send(JSON.stringify(message)); }

  transmit(message) {
    // The round trip counts from the last transmission, not from time spent queued offline.
    message.sentAt = performance.now();
    const { sentAt, ...wire } = message;
    if (wire.t === 'touch' && this.spoken.startsWith('packed')) this.socket.send(this.chains.encode(wire));
    else if (wire.t === 'touch' && this.spoken === 'binary') this.socket.send(encodeTouch(wire));
    else this.socket.send(JSON.stringify(wire));
  }

  connect() {
    const socket = this.socket = new WebSocket(this.url);
    socket.binaryType = 'arraybuffer';
    this.sockets++;
    socket.onopen = () => {
      socket.send(JSON.stringify({ t: 'hello', ...this.hello(), resume: this.resume, acked: this.acked, wire: this.wire === 'json' ? undefined : this.wire }));
    };
    socket.onmessage = event => {
      if (event.data instanceof ArrayBuffer) { for (const frame of frames(event.data)) this.frame(frame, true); return; }
      this.frame(event.data, false);
    };
    socket.onclose = () => {
      this.welcomed = false;
      this.handlers.closed();
      if (this.ended || this.held) return;
      const delay = this.backoff * (0.5 + Math.random());
      this.backoff = Math.min(this.backoff * 2, 5000);
      setTimeout(() => this.connect(), delay);
    };
    socket.onerror = () => {};
  }

  // Closes the socket; with `hold`, it stays closed until reconnect() (a test looks at the page offline).
  disconnect(hold = false) { this.held = hold; this.socket?.close(); }
  reconnect() { if (this.held) { this.held = false; this.connect(); } }

  frame(data, binary) {
    const message = binary ? (new Uint8Array(data)[0] === 4 ? this.packedBatch(data) : decodeFrame(data)) : JSON.parse(data);
    if (Array.isArray(message)) return this.handlers.batch(message, binary ? data.byteLength : data.length);
    if (message.t === 'welcome') return this.welcome(message);
    if (message.t === 'ack') return this.acknowledge(message.n);
    this.handlers.message(message, binary ? data.byteLength : data.length);
  }

  // A packed batch as ["b", seq, diffs], read against the board when it is the next one; otherwise
  // (old, or after a gap) without its diffs, which the board would not apply; unreadable, a gap.
  packedBatch(data) {
    const seq = packedSequence(data);
    if (!this.board.synced || seq !== this.board.seq + 1) return ['b', seq, []];
    try { return decodePackedBatch(data, this.board, this.spoken); } catch { return ['b', seq + 1, []]; }
  }

  welcome(m) {
    this.backoff = 250;
    this.spoken = m.wire ?? 'json';
    this.chains = new TouchChains();
    if (m.role === 'watch') {
      this.welcomed = false;
      this.handlers.welcome(m, null);
      return;
    }
    const newSession = m.resume !== this.resume;
    this.resume = m.resume;
    sessionStorage.setItem(this.resumeKey, this.resume);
    this.welcomed = true;
    let renumbered = null;
    if (newSession) {
      // A new agent (first visit, or the gateway restarted): number what waits from 1 again.
      this.acked = 0;
      renumbered = new Map();
      this.pending.forEach((message, index) => { renumbered.set(message.n, index + 1); message.n = index + 1; });
      this.nextNumber = this.pending.length + 1;
    }
    this.handlers.welcome(m, renumbered);
    if (!newSession) this.acknowledge(m.acked);
    for (const message of this.pending) this.transmit(message);
  }

  acknowledge(through) {
    const now = performance.now();
    while (this.pending.length > 0 && this.pending[0].n <= through) {
      const message = this.pending.shift();
      if (message.sentAt !== undefined) this.rtt.push(now - message.sentAt);
    }
    if (this.rtt.length > 1000) this.rtt.splice(0, 500);
    this.acked = Math.max(this.acked, through);
    this.handlers.acknowledged(through, now);
  }
}
