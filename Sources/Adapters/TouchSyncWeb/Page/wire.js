// The browser wire's binary frames (docs/protocol.md, "Binary frames"): the
// page's touch messages to the gateway, and the gateway's batches and acks,
// with every integer a varint instead of decimal text. Values reach 2^53
// (epoch microseconds), so varints are built with arithmetic, not the 32-bit
// bitwise operators.

export const PHASES = ['began', 'moved', 'stationary', 'ended', 'cancelled'];

// Halves away from zero, as the gateway rounds the JSON wire's samples.
const fixed = (value, scale) => {
  const scaled = value * scale;
  return scaled < 0 ? -Math.round(-scaled) : Math.round(scaled);
};

class Writer {
  constructor() { this.bytes = []; }
  byte(b) { this.bytes.push(b); }
  varint(v) {
    while (v >= 128) { this.bytes.push((v % 128) + 128); v = Math.floor(v / 128); }
    this.bytes.push(v);
  }
  zigzag(v) { this.varint(v >= 0 ? 2 * v : -2 * v - 1); }
}

// A touch message {n, phase, id, s, p} (samples [x, y, t, force, azimuth,
// altitude] in CSS pixels and milliseconds) as one binary frame.
export function encodeTouch(message) {
  const quantize = list => (list ?? []).map(v => ({
    x: fixed(v[0], 64), y: fixed(v[1], 64), t: fixed(v[2], 1000),
    f: v[3] == null ? null : fixed(v[3], 1024),
    az: v[4] == null ? null : fixed(v[4], 4096), al: v[4] == null ? null : fixed(v[5] ?? 0, 4096),
  }));
  const s = quantize(message.s), p = quantize(message.p);
  const all = s.concat(p);
  const force = all.some(v => v.f !== null);
  const angles = all.some(v => v.az !== null);
  const w = new Writer();
  w.byte(1);
  w.varint(message.n);
  w.byte(PHASES.indexOf(message.phase));
  w.varint(message.id);
  w.varint(s.length);
  w.varint(p.length);
  w.byte((force ? 1 : 0) | (angles ? 2 : 0));
  let x = 0, y = 0, t = 0;
  for (const v of all) {
    w.zigzag(v.x - x); w.zigzag(v.y - y); w.zigzag(v.t - t);
    x = v.x; y = v.y; t = v.t;
    // Each sample says whether it has them: 0 none, else the value's code plus 1.
    if (force) w.varint(v.f === null ? 0 : Math.max(0, v.f) + 1);
    if (angles) {
      if (v.az === null) w.varint(0);
      else { w.varint((v.az >= 0 ? 2 * v.az : -2 * v.az - 1) + 1); w.zigzag(v.al); }
    }
  }
  return new Uint8Array(w.bytes);
}

class Reader {
  constructor(buffer) { this.bytes = new Uint8Array(buffer); this.at = 0; }
  byte() {
    if (this.at >= this.bytes.length) throw new Error('binary frame cut short');
    return this.bytes[this.at++];
  }
  varint() {
    let value = 0, scale = 1;
    for (;;) {
      const b = this.byte();
      value += (b % 128) * scale;
      if (b < 128) return value;
      scale *= 128;
    }
  }
  zigzag() { const v = this.varint(); return v % 2 === 0 ? v / 2 : -(v + 1) / 2; }
  string(length = this.varint()) {
    const text = new TextDecoder().decode(this.bytes.subarray(this.at, this.at + length));
    this.at += length;
    return text;
  }
  samples() {
    const count = this.varint();
    const flat = new Array(count * 4);
    for (let i = 0; i < count * 4; i += 4) {
      flat[i] = this.zigzag(); flat[i + 1] = this.zigzag(); flat[i + 2] = this.zigzag(); flat[i + 3] = this.varint();
    }
    return flat;
  }
}

// A gateway's binary frame: {t: 'ack', n} or a batch ['b', seq, diffs],
// exactly what JSON.parse gives for the same message in JSON.
export function decodeFrame(buffer) {
  const r = new Reader(buffer);
  const kind = r.byte();
  if (kind === 2) return { t: 'ack', n: r.varint() };
  if (kind !== 1) throw new Error('unknown binary frame ' + kind);
  const seq = r.varint();
  const count = r.varint();
  const diffs = [];
  for (let i = 0; i < count; i++) {
    const letter = String.fromCharCode(r.byte());
    switch (letter) {
      case 'b': diffs.push(['b', r.varint(), r.string(), r.varint(), r.varint(), r.varint()]); break;
      case 'a': diffs.push(['a', r.varint(), r.varint(), r.samples()]); break;
      case 'p': diffs.push(['p', r.varint(), r.samples()]); break;
      case 'm': diffs.push(['m', r.varint(), r.varint(), r.samples()]); break;
      case 'A': diffs.push(['A', r.varint(), r.varint()]); break;
      case 'c': diffs.push(['c', r.varint()]); break;
      case 'C': { const length = r.varint(); diffs.push(['C', length === 0 ? null : r.string(length - 1)]); break; }
      case 'r': diffs.push(['r', r.varint()]); break;
      case 'R': {
        const id = r.varint(), owner = r.string(), touch = r.varint(), rgba = r.varint(), w = r.varint(), pos = r.varint();
        // Keys in the JSON stroke's order: pos (accepted strokes only) before the samples.
        const stroke = pos > 0 ? { id, owner, touch, rgba, w, pos: pos - 1 } : { id, owner, touch, rgba, w };
        stroke.s = r.samples();
        stroke.p = r.samples();
        diffs.push(['R', stroke]);
        break;
      }
      default: throw new Error('unknown diff ' + letter);
    }
  }
  return ['b', seq, diffs];
}

// The frames of one binary message: a bundle's (0x03, then each frame as its
// varint length and its bytes), or the message itself.
export function frames(buffer) {
  const bytes = new Uint8Array(buffer);
  if (bytes[0] !== 3) return [buffer];
  const r = new Reader(buffer);
  r.at = 1;
  const out = [];
  while (r.at < bytes.length) {
    const length = r.varint();
    out.push(buffer.slice(r.at, r.at + length));
    r.at += length;
  }
  return out;
}
