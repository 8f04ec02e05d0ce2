// The board replica and its renderer, shared by the live board and the replay.
// The replica follows docs/protocol.md ("The browser wire"): a snapshot, then
// batches in sequence order; a gap means a resync. Positions are the hub's
// fixed point (1/64 point); the viewport (view.js) maps points to the screen.

export const UNITS = 64;

// A flat delta-coded sample list [dx, dy, dt, f, ...] to absolute [x, y, t, f, ...];
// the first sample's deltas are from `base` (an absolute list, its last sample) when given.
export function decodeSamples(flat, base) {
  const out = new Array(flat.length);
  let x = 0, y = 0, t = 0;
  if (base && base.length >= 4) { x = base[base.length - 4]; y = base[base.length - 3]; t = base[base.length - 2]; }
  for (let i = 0; i < flat.length; i += 4) {
    x += flat[i]; y += flat[i + 1]; t += flat[i + 2];
    out[i] = x; out[i + 1] = y; out[i + 2] = t; out[i + 3] = flat[i + 3];
  }
  return out;
}

function strokeFrom(wire) {
  const s = decodeSamples(wire.s);
  return {
    id: wire.id, owner: wire.owner, touch: wire.touch, rgba: wire.rgba, w: wire.w,
    pos: wire.pos ?? null, s, p: decodeSamples(wire.p, s),
  };
}

export class Board {
  constructor() { this.reset(); }

  reset() {
    this.seq = -1;          // no snapshot yet
    this.accepted = [];     // in accept order
    this.active = new Map(); // id -> stroke
    this.time = 0;          // hub time of the last batch (µs)
    this.changedAccepted = 'all'; // 'all' | array of strokes appended since the last render
  }

  get synced() { return this.seq >= 0; }

  loadSnapshot(message) {
    this.accepted = message.accepted.map(strokeFrom);
    this.active = new Map(message.active.map(w => [w.id, strokeFrom(w)]));
    this.seq = message.seq;
    this.changedAccepted = 'all';
  }

  // Applies a batch ["b", seq, diffs, time?]; returns 'applied', 'old'
  // (already in the replica) or 'gap' (resync needed).
  applyBatch(batch) {
    const seq = batch[1];
    if (!this.synced || seq <= this.seq) return 'old';
    if (seq !== this.seq + 1) return 'gap';
    for (const d of batch[2]) this.applyDiff(d);
    this.seq = seq;
    if (batch.length > 3) this.time = batch[3];
    return 'applied';
  }

  applyDiff(d) {
    switch (d[0]) {
      case 'b':
        this.active.set(d[1], { id: d[1], owner: d[2], touch: d[3], rgba: d[4], w: d[5], pos: null, s: [], p: [] });
        break;
      case 'a': {
        const stroke = this.active.get(d[1]);
        if (!stroke) break;
        stroke.s.length = d[2] * 4;
        const samples = decodeSamples(d[3], stroke.s);
        for (let i = 0; i < samples.length; i++) stroke.s.push(samples[i]);
        break;
      }
      case 'p': {
        const stroke = this.active.get(d[1]);
        if (stroke) stroke.p = decodeSamples(d[2], stroke.s);
        break;
      }
      case 'm': {
        const stroke = this.active.get(d[1]);
        if (!stroke) break;
        const sample = decodeSamples(d[3]);
        for (let k = 0; k < 4; k++) stroke.s[d[2] * 4 + k] = sample[k];
        break;
      }
      case 'A': {
        const stroke = this.active.get(d[1]);
        if (!stroke) break;
        this.active.delete(d[1]);
        stroke.p = [];
        stroke.pos = d[2];
        this.accepted.push(stroke);
        if (this.changedAccepted !== 'all') this.changedAccepted.push(stroke);
        this.onAccepted?.(stroke);
        break;
      }
      case 'c': {
        const stroke = this.active.get(d[1]);
        this.active.delete(d[1]);
        if (stroke) this.onCancelled?.(stroke);
        break;
      }
      case 'C':
        this.accepted = d[1] === null ? [] : this.accepted.filter(s => s.owner !== d[1]);
        this.changedAccepted = 'all';
        break;
      case 'r':
        this.accepted = this.accepted.filter(s => s.id !== d[1]);
        this.changedAccepted = 'all';
        break;
      case 'R': {
        const stroke = strokeFrom(d[1]);
        let i = this.accepted.findIndex(s => s.pos > stroke.pos);
        if (i < 0) i = this.accepted.length;
        this.accepted.splice(i, 0, stroke);
        this.changedAccepted = 'all';
        break;
      }
    }
  }

  // What tests and the status bar read.
  summary() {
    const describe = s => ({ id: s.id, owner: s.owner, touch: s.touch, samples: s.s.length / 4, rgba: s.rgba });
    return { seq: this.seq, accepted: this.accepted.map(describe), active: [...this.active.values()].map(describe) };
  }

  // The accepted stroke under (x, y) in points, or null (the eraser).
  strokeAt(x, y, slop) {
    const ux = x * UNITS, uy = y * UNITS;
    for (let i = this.accepted.length - 1; i >= 0; i--) {
      const s = this.accepted[i];
      const reach = (s.w / 2 + slop * UNITS) ** 2;
      for (let k = 0; k < s.s.length; k += 4) {
        const dx = s.s[k] - ux, dy = s.s[k + 1] - uy;
        if (dx * dx + dy * dy <= reach) return s;
      }
    }
    return null;
  }
}
