// The selection: which accepted strokes are selected, their bounds, what a
// marquee, a lasso or a click picks, and the edits a drag makes (docs/protocol.md,
// "Edits"). Positions are board points; strokes hold the hub's fixed point
// (UNITS per point). No DOM here.
import { UNITS } from './board.js';

// A stroke's bounds in points, widened by half its width: [minX, minY, maxX, maxY].
export function strokeBounds(stroke) {
  const s = stroke.s;
  if (s.length < 4) return null;
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (let k = 0; k < s.length; k += 4) {
    if (s[k] < x0) x0 = s[k];
    if (s[k] > x1) x1 = s[k];
    if (s[k + 1] < y0) y0 = s[k + 1];
    if (s[k + 1] > y1) y1 = s[k + 1];
  }
  const half = stroke.w / 2;
  return [(x0 - half) / UNITS, (y0 - half) / UNITS, (x1 + half) / UNITS, (y1 + half) / UNITS];
}

// The union of some strokes' bounds, or null.
export function unionBounds(strokes) {
  let r = null;
  for (const stroke of strokes) {
    const b = stroke.bounds ?? strokeBounds(stroke);
    if (!b) continue;
    r = r ? [Math.min(r[0], b[0]), Math.min(r[1], b[1]), Math.max(r[2], b[2]), Math.max(r[3], b[3])] : b.slice();
  }
  return r;
}

// Whether a stroke has a sample inside the rectangle [x0, y0, x1, y1] (any corner order), in points.
export function touchesRect(stroke, rect) {
  const [x0, x1] = rect[0] <= rect[2] ? [rect[0], rect[2]] : [rect[2], rect[0]];
  const [y0, y1] = rect[1] <= rect[3] ? [rect[1], rect[3]] : [rect[3], rect[1]];
  const s = stroke.s;
  const ux0 = x0 * UNITS, ux1 = x1 * UNITS, uy0 = y0 * UNITS, uy1 = y1 * UNITS;
  for (let k = 0; k < s.length; k += 4) {
    if (s[k] >= ux0 && s[k] <= ux1 && s[k + 1] >= uy0 && s[k + 1] <= uy1) return true;
  }
  return false;
}

// Whether a point [x, y] lies inside a polygon of [x, y] points (even-odd rule; closed implicitly).
export function insidePolygon(point, polygon) {
  const [x, y] = point;
  let inside = false;
  for (let i = 0, j = polygon.length - 1; i < polygon.length; j = i++) {
    const [xi, yi] = polygon[i], [xj, yj] = polygon[j];
    if ((yi > y) !== (yj > y) && x < (xj - xi) * (y - yi) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

// Whether a stroke has a sample inside a lasso (a polygon of board points, at
// least three), as `touchesRect` for a marquee: the lasso picks strokes a
// rectangle cannot single out (one beside another, inside its corner).
export function touchesLasso(stroke, polygon) {
  if (polygon.length < 3) return false;
  const s = stroke.s;
  let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const [x, y] of polygon) { x0 = Math.min(x0, x); y0 = Math.min(y0, y); x1 = Math.max(x1, x); y1 = Math.max(y1, y); }
  for (let k = 0; k < s.length; k += 4) {
    const p = [s[k] / UNITS, s[k + 1] / UNITS];
    if (p[0] >= x0 && p[0] <= x1 && p[1] >= y0 && p[1] <= y1 && insidePolygon(p, polygon)) return true;
  }
  return false;
}

// p ↦ origin + (p − origin) × scale + offset, as the hub computes it in units
// (rounded halves away from zero), on a flat [x, y, t, f, ...] list.
export function transformSamples(s, { dx = 0, dy = 0, scale = 1, ox = 0, oy = 0 }) {
  const round = v => Math.sign(v) * Math.round(Math.abs(v));
  const [udx, udy, uox, uoy] = [dx, dy, ox, oy].map(v => round(v * UNITS));
  scale = Math.fround(scale);   // the hub's message carries it as a 32-bit float
  const out = s.slice();
  for (let k = 0; k < s.length; k += 4) {
    out[k] = round(uox + (s[k] - uox) * scale + udx);
    out[k + 1] = round(uoy + (s[k + 1] - uoy) * scale + udy);
  }
  return out;
}

// A stroke as an edit leaves it (a preview until the hub's diffs arrive).
export function editedStroke(stroke, edit) {
  const copy = { ...stroke, shape: undefined, bounds: undefined };
  if (edit.op === 'move' || edit.op === 'duplicate') copy.s = transformSamples(stroke.s, edit);
  if (edit.op === 'recolour') copy.rgba = edit.rgba;
  return copy;
}

// The handle that scales the selection: a square at its bottom right corner, `size` screen pixels wide.
export function handleAt(bounds, zoom, size = 12) {
  const half = size / 2 / zoom;
  return [bounds[2] - half, bounds[3] - half, bounds[2] + half, bounds[3] + half];
}

export function inside(point, rect) {
  return point[0] >= rect[0] && point[0] <= rect[2] && point[1] >= rect[1] && point[1] <= rect[3];
}

// The scale that takes the bounds' far corner from where the drag began to where
// the pointer is, about the bounds' top left (uniform; within the hub's 1/64 to 64).
export function scaleFor(bounds, from, to) {
  const [x0, y0] = bounds;
  const before = Math.hypot(from[0] - x0, from[1] - y0);
  const after = Math.hypot(to[0] - x0, to[1] - y0);
  if (before === 0) return 1;
  return Math.min(64, Math.max(1 / 64, after / before));
}

// The strokes one may select: one's own, or everyone's for an admin.
export class Selection {
  constructor() { this.ids = new Set(); }
  get size() { return this.ids.size; }
  has(id) { return this.ids.has(id); }
  clear() { this.ids.clear(); }
  set(ids) { this.ids = new Set(ids); }
  add(ids) { for (const id of ids) this.ids.add(id); }
  // Forgets strokes no longer on the board; returns the selected strokes, in board order.
  strokes(board) {
    const present = board.accepted.filter(s => this.ids.has(s.id));
    if (present.length !== this.ids.size) this.ids = new Set(present.map(s => s.id));
    return present;
  }
}
