// The board replica and its renderer, shared by the live board and the replay.
// The replica follows docs/protocol.md ("The browser wire"): a snapshot, then
// batches in sequence order; a gap means a resync. Positions are the hub's
// fixed point (1/64 point); one point is one CSS pixel here.

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
        break;
      }
      case 'c':
        this.active.delete(d[1]);
        break;
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

export function cssColor(rgba, alphaScale = 1) {
  const r = (rgba >>> 24) & 255, g = (rgba >>> 16) & 255, b = (rgba >>> 8) & 255, a = (rgba & 255) / 255;
  return `rgba(${r},${g},${b},${(a * alphaScale).toFixed(3)})`;
}

function tracePath(ctx, s, from = 0) {
  ctx.beginPath();
  ctx.moveTo(s[from] / UNITS, s[from + 1] / UNITS);
  if (s.length - from === 4) ctx.lineTo(s[from] / UNITS + 0.01, s[from + 1] / UNITS);
  for (let k = from + 4; k < s.length; k += 4) ctx.lineTo(s[k] / UNITS, s[k + 1] / UNITS);
}

// Draws a board on a canvas: accepted strokes from a cached offscreen layer
// (only new ones are added to it; removals redraw it), strokes in progress
// lighter on top, their predicted tails dashed, a gray spot at every live touch.
export class Renderer {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.layer = document.createElement('canvas');
    this.layerCtx = this.layer.getContext('2d');
    this.frameTimes = [];
    this.resize();
  }

  resize() {
    const ratio = window.devicePixelRatio || 1;
    const width = this.canvas.clientWidth, height = this.canvas.clientHeight;
    this.ratio = ratio;
    for (const c of [this.canvas, this.layer]) {
      c.width = Math.max(1, Math.round(width * ratio));
      c.height = Math.max(1, Math.round(height * ratio));
    }
    this.layerValid = false;
  }

  strokeStyle(ctx, stroke, alphaScale) {
    ctx.strokeStyle = cssColor(stroke.rgba, alphaScale);
    ctx.lineWidth = Math.max(0.5, stroke.w / UNITS);
    ctx.lineCap = 'round';
    ctx.lineJoin = 'round';
  }

  drawAccepted(ctx, stroke) {
    if (stroke.s.length === 0) return;
    this.strokeStyle(ctx, stroke, 1);
    tracePath(ctx, stroke.s);
    ctx.stroke();
  }

  render(board) {
    const started = performance.now();
    const { ctx, layerCtx, ratio } = this;
    if (!this.layerValid || board.changedAccepted === 'all') {
      layerCtx.setTransform(1, 0, 0, 1, 0, 0);
      layerCtx.clearRect(0, 0, this.layer.width, this.layer.height);
      layerCtx.setTransform(ratio, 0, 0, ratio, 0, 0);
      for (const stroke of board.accepted) this.drawAccepted(layerCtx, stroke);
      this.layerValid = true;
    } else {
      for (const stroke of board.changedAccepted) this.drawAccepted(layerCtx, stroke);
    }
    board.changedAccepted = [];

    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    ctx.drawImage(this.layer, 0, 0);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    for (const stroke of board.active.values()) {
      if (stroke.s.length === 0) continue;
      this.strokeStyle(ctx, stroke, 0.45);   // in progress: lighter (seed 001)
      tracePath(ctx, stroke.s);
      ctx.stroke();
      if (stroke.p.length > 0) {             // the guess, replaced at the next event (seed 002)
        const n = stroke.s.length;
        ctx.setLineDash([3, 4]);
        ctx.beginPath();
        ctx.moveTo(stroke.s[n - 4] / UNITS, stroke.s[n - 3] / UNITS);
        for (let k = 0; k < stroke.p.length; k += 4) ctx.lineTo(stroke.p[k] / UNITS, stroke.p[k + 1] / UNITS);
        ctx.stroke();
        ctx.setLineDash([]);
      }
    }
    ctx.fillStyle = 'rgba(128,128,128,0.35)';  // a gray spot at each live touch (seed 000)
    for (const stroke of board.active.values()) {
      const n = stroke.s.length;
      if (n === 0) continue;
      ctx.beginPath();
      ctx.arc(stroke.s[n - 4] / UNITS, stroke.s[n - 3] / UNITS, 22, 0, Math.PI * 2);
      ctx.fill();
    }
    const took = performance.now() - started;
    this.frameTimes.push(took);
    if (this.frameTimes.length > 2000) this.frameTimes.splice(0, 1000);
    return took;
  }
}
