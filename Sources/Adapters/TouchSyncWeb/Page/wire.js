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

// Samples [x, y, t, force, azimuth, altitude] in the hub's fixed point, as the gateway rounds JSON ones.
const quantize = list => (list ?? []).map(v => ({
  x: fixed(v[0], 64), y: fixed(v[1], 64), t: fixed(v[2], 1000),
  f: v[3] == null ? null : fixed(v[3], 1024),
  az: v[4] == null ? null : fixed(v[4], 4096), al: v[4] == null ? null : fixed(v[5] ?? 0, 4096),
}));

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

// One diff of a binary batch: its letter, then its fields in the JSON diff's order.
function readDiff(r) {
  const letter = String.fromCharCode(r.byte());
  switch (letter) {
    case 'b': return ['b', r.varint(), r.string(), r.varint(), r.varint(), r.varint()];
    case 'a': return ['a', r.varint(), r.varint(), r.samples()];
    case 'p': return ['p', r.varint(), r.samples()];
    case 'm': return ['m', r.varint(), r.varint(), r.samples()];
    case 'A': return ['A', r.varint(), r.varint()];
    case 'c': return ['c', r.varint()];
    case 'C': { const length = r.varint(); return ['C', length === 0 ? null : r.string(length - 1)]; }
    case 'r': return ['r', r.varint()];
    case 'R': {
      const id = r.varint(), owner = r.string(), touch = r.varint(), rgba = r.varint(), w = r.varint(), pos = r.varint();
      // Keys in the JSON stroke's order: pos (accepted strokes only) before the samples.
      const stroke = pos > 0 ? { id, owner, touch, rgba, w, pos: pos - 1 } : { id, owner, touch, rgba, w };
      stroke.s = r.samples();
      stroke.p = r.samples();
      return ['R', stroke];
    }
    default: throw new Error('unknown diff ' + letter);
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
  for (let i = 0; i < count; i++) diffs.push(readDiff(r));
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

// The packed wire (docs/protocol.md, "Packed frames"): touches chained per
// connection, batches whose samples go as bit-packed blocks read against the
// board. Positions and times stay below 2^53, so plain numbers are exact;
// only the prediction's product goes through BigInt.

// Where a prediction `gap` after the last sample is expected, on the line
// through the last two (truncated toward zero, 64-bit as the hub does it).
function along(last, before, lastT, beforeT, gap) {
  if (before === undefined) return last;
  const interval = lastT - beforeT;
  if (interval <= 0) return last;
  const limit = 2n ** 63n;
  const motion = BigInt(last) - BigInt(before);
  const scaled = motion * BigInt(gap);
  if (motion >= limit || motion < -limit || scaled >= limit || scaled < -limit) return last;
  const sum = BigInt(last) + scaled / BigInt(interval);
  return sum >= limit || sum < -limit ? last : Number(sum);
}

// A run's last two samples ({x, y, t}) and where its next one is expected:
// the anchor with none, the last with one, along the last two with two.
// `third` (the sample before those) gives packed2 its period: the shorter of
// the last two intervals, so a skipped event does not shift what follows.
class Run {
  constructor(last, before, third) { this.last = last; this.before = before; this.third = third; }
  expected(anchor) {
    const l = this.last, b = this.before;
    if (!l) return anchor;
    if (!b) return l;
    return { x: 2 * l.x - b.x, y: 2 * l.y - b.y, t: 2 * l.t - b.t };
  }
  alongMotion(gap) {
    const l = this.last, b = this.before;
    return {
      x: along(l.x, b?.x, l.t, b?.t, gap), y: along(l.y, b?.y, l.t, b?.t, gap), t: l.t + gap,
    };
  }
  get interval() { return this.last && this.before ? this.last.t - this.before.t : 0; }
  get period() {
    const l = this.last, b = this.before, c = this.third;
    if (!l || !b) return 0;
    return c ? Math.min(l.t - b.t, b.t - c.t) : l.t - b.t;
  }
  expectedByPeriod(anchor) {
    const e = this.expected(anchor);
    return this.last && this.before ? { x: e.x, y: e.y, t: this.last.t + this.period } : e;
  }
  alongMotionByPeriod(gap) {
    const l = this.last, b = this.before, from = l.t - this.period;
    return {
      x: along(l.x, b?.x, l.t, b ? from : undefined, gap), y: along(l.y, b?.y, l.t, b ? from : undefined, gap), t: l.t + gap,
    };
  }
  advance(point) { this.third = this.before; this.before = this.last; this.last = point; }
  copy() { return new Run(this.last, this.before, this.third); }
}

const zz = v => (v >= 0 ? 2 * v : -2 * v - 1);

// One connection's chained touches: make a new one for every WebSocket.
export class TouchChains {
  constructor() {
    this.number = 0; this.touch = 0; this.anchor = { x: 0, y: 0, t: 0 };
    this.gap = 0; this.force = 0; this.azimuth = 0; this.altitude = 0;
    this.chains = []; // {touch, run}, least recently named first
  }
  take(touch) {
    const i = this.chains.findIndex(c => c.touch === touch);
    if (i >= 0) return this.chains.splice(i, 1)[0];
    if (this.chains.length >= 32) this.chains.shift();
    return { touch, run: new Run() };
  }

  // A touch message {n, phase, id, s, p} as one chained frame (0x04 to 0x07).
  encode(message) {
    const s = quantize(message.s), p = quantize(message.p);
    const all = s.concat(p);
    const force = all.some(v => v.f !== null);
    const angles = all.some(v => v.az !== null);
    const phase = PHASES.indexOf(message.phase);
    const w = new Writer();
    w.byte(4 | (force ? 1 : 0) | (angles ? 2 : 0));
    w.zigzag(message.n - this.number - 1);
    const same = message.id === this.touch;
    w.byte(phase | (same ? 8 : 0) | (Math.min(s.length, 3) << 4) | (Math.min(p.length, 3) << 6));
    if (!same) w.zigzag(message.id - this.touch);
    if (s.length >= 3) w.varint(s.length - 3);
    if (p.length >= 3) w.varint(p.length - 3);
    const chain = this.take(message.id);
    const attributes = v => {
      if (force) {
        if (v.f === null) w.varint(0);
        else { w.varint(zz(v.f - this.force) + 1); this.force = v.f; }
      }
      if (angles) {
        if (v.az === null) w.varint(0);
        else {
          w.varint(zz(v.az - this.azimuth) + 1); w.zigzag(v.al - this.altitude);
          this.azimuth = v.az; this.altitude = v.al;
        }
      }
    };
    for (const v of s) {
      const e = chain.run.expected(this.anchor);
      w.zigzag(v.x - e.x); w.zigzag(v.y - e.y); w.zigzag(v.t - e.t);
      attributes(v);
      const point = { x: v.x, y: v.y, t: v.t };
      chain.run.advance(point);
      this.anchor = point;
    }
    const tail = chain.run.copy();
    p.forEach((v, i) => {
      if (i === 0 && chain.run.last) {
        const gap = v.t - chain.run.last.t;
        const e = chain.run.alongMotion(gap);
        w.zigzag(v.x - e.x); w.zigzag(v.y - e.y); w.zigzag(gap - this.gap);
        this.gap = gap;
      } else {
        const e = tail.expected(this.anchor);
        w.zigzag(v.x - e.x); w.zigzag(v.y - e.y); w.zigzag(v.t - e.t);
      }
      attributes(v);
      tail.advance({ x: v.x, y: v.y, t: v.t });
    });
    this.number = message.n;
    this.touch = message.id;
    if (phase < 3) this.chains.push(chain);
    return new Uint8Array(w.bytes);
  }
}

// A packed batch (0x04), read against `board` (its active strokes: {s: flat
// absolute [x, y, t, f, ...]}) before it: ['b', seq, diffs], exactly what
// JSON.parse gives for the same batch in JSON (on wire packed2, a block's
// appends and predictions in stroke order). `wire`: 'packed' or 'packed2'.
export function decodePackedBatch(buffer, board, wire = 'packed') {
  const r = new Reader(buffer);
  if (r.byte() !== 4) throw new Error('not a packed batch');
  const seq = r.varint();
  const count = wire === 'packed2' ? Infinity : r.varint();   // packed2: the items run to the frame's end
  const diffs = [];
  // Strokes the batch began, extended or ended so far: {count, last, before} or null (ended).
  const changed = new Map();
  const chainOf = id => {
    if (changed.has(id)) return changed.get(id);
    const stroke = board.active.get(id);
    if (!stroke) return null;
    const s = stroke.s, n = s.length / 4;
    const at = k => ({ x: s[4 * k], y: s[4 * k + 1], t: s[4 * k + 2], f: s[4 * k + 3] });
    return { count: n, last: n > 0 ? at(n - 1) : undefined, before: n > 1 ? at(n - 2) : undefined, third: n > 2 ? at(n - 3) : undefined };
  };
  // packed2: the strokes in progress where a block stands, by id (a segment's rank indexes them);
  // `ranked` keeps them until a diff begins or ends a stroke.
  let ranked = null;
  const inProgress = () => {
    const ids = [...board.active.keys()].filter(id => changed.get(id) !== null);
    for (const [id, chain] of changed) if (chain !== null && !board.active.has(id)) ids.push(id);
    return ids.sort((a, b) => a - b);
  };
  for (let i = 0; i < count && (count !== Infinity || r.at < r.bytes.length); i++) {
    const letter = r.bytes[r.at];
    if (letter === (wire === 'packed2' ? 0x53 : 0x73)) {
      r.at++;
      if (wire === 'packed2') ranked ??= inProgress();
      readBlock(r, chainOf, changed, diffs, wire === 'packed2' ? ranked : null);
      continue;
    }
    const d = readDiff(r);
    if (d[0] === 'b' || d[0] === 'A' || d[0] === 'c') ranked = null;   // the strokes in progress changed
    if (d[0] === 'b') changed.set(d[1], { count: 0 });
    else if (d[0] === 'A' || d[0] === 'c') changed.set(d[1], null);
    diffs.push(d);
  }
  if (r.at !== r.bytes.length) throw new Error('bytes after a packed batch');
  return ['b', seq, diffs];
}

// A packed batch's sequence, read without the rest.
export function packedSequence(buffer) {
  const r = new Reader(buffer);
  r.byte();
  return r.varint();
}

// Flat JSON samples from absolute ones: x, y, t from the previous (the first from base), then force.
function flat(samples, base) {
  const out = [];
  let p = base ?? { x: 0, y: 0, t: 0 };
  for (const v of samples) { out.push(v.x - p.x, v.y - p.y, v.t - p.t, v.f); p = v; }
  return out;
}

// `ranked`: on wire packed2, the strokes in progress by id (its blocks, "S",
// name segments by rank and give first predicted samples widths of their own).
function readBlock(r, chainOf, changed, diffs, ranked) {
  const two = ranked !== null;
  const head = r.varint();
  const k = two ? Math.floor(head / 2) : head;
  if (k < 1) throw new Error('a block has at least one segment');
  const segments = [];
  let id = 0, rank = -1;
  for (let i = 0; i < k; i++) {
    let n, tail;
    if (two) {
      const h = r.byte();
      let d = h & 15;
      n = (h >> 4) & 3; tail = h >> 6;
      if (d === 15) d += r.varint();
      if (n === 3) n += r.varint();
      if (tail === 3) tail += r.varint();
      rank += 1 + d;
      if (rank >= ranked.length) throw new Error('a segment rank past the strokes in progress');
      id = ranked[rank];
    } else {
      id += r.zigzag();
      const code = r.varint();
      tail = code % 4;
      if (tail === 3) tail += r.varint();
      n = Math.floor(code / 4);
    }
    segments.push({ id, n, tail });
  }
  let wxy, wt, wf, wpxy, wpt;
  if (two) {
    const real = r.byte(), motion = r.byte();
    wf = head % 2 === 1 ? r.byte() : 0;
    if (wf > 15) throw new Error('a width over 15');
    [wxy, wt, wpxy, wpt] = [real & 15, real >> 4, motion & 15, motion >> 4];
  } else {
    wxy = r.varint(); wt = r.varint(); wf = r.varint();
    if (wxy > 64 || wt > 64 || wf > 64) throw new Error('a width over 64');
    [wpxy, wpt] = [wxy, wt];
  }
  // A segment's first predicted sample is coded against the motion when its stroke has a sample by then.
  let bits = 0;
  for (const seg of segments) {
    const tail = Math.max(seg.tail - 1, 0);
    const motion = tail > 0 && (seg.n > 0 || chainOf(seg.id)?.last !== undefined);
    bits += (seg.n + tail - (motion ? 1 : 0)) * (2 * wxy + wt + wf) + (motion ? 2 * wpxy + wpt + wf : 0);
  }
  let bit = r.at * 8;
  r.at += Math.ceil(bits / 8);
  if (r.at > r.bytes.length) throw new Error('the bit stream runs past the frame');
  const bytes = r.bytes;
  // A field: `width` bits (least significant first), all ones meaning the next escaped varint.
  const field = width => {
    if (width === 0) return 0;
    let value = 0, scale = 1, all = true;
    for (let done = 0; done < width; done++, bit++) {
      const b = (bytes[bit >> 3] >> (bit & 7)) & 1;
      if (b) value += scale; else all = false;
      scale *= 2;
    }
    return all ? r.varint() : value;
  };
  const unzz = v => (v % 2 === 0 ? v / 2 : -(v + 1) / 2);
  // The anchor starts at the last stored sample of the first segment with samples whose stroke holds one;
  // the gap of a block's first prediction is expected to be its stroke's last interval.
  let anchor = { x: 0, y: 0, t: 0 }, gap = null, force = 0;
  for (const seg of segments) {
    const last = (seg.n > 0 || seg.tail > 1) ? chainOf(seg.id)?.last : undefined;
    if (last) { anchor = { x: last.x, y: last.y, t: last.t }; break; }
  }
  const sample = e => {
    const x = e.x + unzz(field(wxy)), y = e.y + unzz(field(wxy)), t = e.t + unzz(field(wt));
    force += unzz(field(wf));
    return { x, y, t, f: force };
  };
  for (const seg of segments) {
    const known = chainOf(seg.id);
    if (!known && (seg.n > 0 || seg.tail > 1)) throw new Error('samples for stroke ' + seg.id + ', not in progress');
    const chain = known ? { ...known } : { count: 0 };
    const run = new Run(chain.last, chain.before, chain.third);
    const offset = chain.count, base = chain.last;
    const real = [];
    for (let i = 0; i < seg.n; i++) {
      const v = sample(two ? run.expectedByPeriod(anchor) : run.expected(anchor));
      real.push(v);
      run.advance(v);
      anchor = v;
    }
    chain.third = run.third; chain.before = run.before; chain.last = run.last; chain.count = offset + seg.n;
    const tail = [];
    const tailRun = run.copy();
    for (let i = 0; i < Math.max(seg.tail - 1, 0); i++) {
      let v;
      if (i === 0 && run.last) {
        const rx = unzz(field(wpxy)), ry = unzz(field(wpxy));
        gap = (gap ?? (two ? run.period : run.interval)) + unzz(field(wpt));
        force += unzz(field(wf));
        const e = two ? run.alongMotionByPeriod(gap) : run.alongMotion(gap);
        v = { x: e.x + rx, y: e.y + ry, t: run.last.t + gap, f: force };
      } else {
        v = sample(two ? tailRun.expectedByPeriod(anchor) : tailRun.expected(anchor));
      }
      tail.push(v);
      tailRun.advance(v);
    }
    if (known) changed.set(seg.id, chain);
    if (seg.n > 0 || seg.tail === 0) diffs.push(['a', seg.id, offset, flat(real, offset > 0 ? base : undefined)]);
    if (seg.tail > 0) diffs.push(['p', seg.id, flat(tail, chain.last)]);
  }
}
