// Ink outlines: a stroke's samples to a filled outline whose width follows
// pressure, in the manner of perfect-freehand (tldraw's draw tool), written
// for TouchSync. The SVG renderer (Sources/TouchSyncRender/InkOutline.swift)
// implements the same steps with the same constants, so an export looks like
// the screen; docs/protocol.md ("Drawing ink") states them for other clients.
//
// 1. Input: points [x, y, t, pressure] (points, milliseconds, 0-1 or null).
// 2. Pressure: the samples' own when any has one; otherwise simulated from
//    speed (a mouse): faster is thinner, eased from sample to sample.
// 3. The centre line passes through every sample as a Catmull-Rom spline,
//    sampled at most every 4 points, so a coarse circle stays round.
// 4. Radius = width/2 × (1 − THINNING + 2 × THINNING × pressure), tapered over
//    the first and (once the stroke ended) the last stretch when simulated.
// 5. The outline: both sides of the centre line, round caps, traced as
//    quadratic curves through the midpoints of its points.

export const THINNING = 0.6;
export const STEP = 4;            // centre-line points at most this far apart (points)
export const MAX_SUBDIVISIONS = 16;
export const MIN_DISTANCE = 0.5;  // samples closer than this to the previous one are skipped
const CAP_POINTS = 6;             // points on each half-circle cap (besides its ends)

function simulatedPressures(points) {
  const out = new Array(points.length);
  let pressure = 0.5;
  out[0] = pressure;
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1], b = points[i];
    const distance = Math.hypot(b[0] - a[0], b[1] - a[1]);
    const elapsed = Math.max(1, b[2] - a[2]);
    const speed = distance / elapsed;               // points per millisecond
    const target = Math.max(0.15, 0.85 - speed * 0.18);
    pressure += (target - pressure) * 0.35;
    out[i] = pressure;
  }
  return out;
}

// The centre line: [x, y, pressure] points, at most STEP apart.
export function centreLine(input) {
  const kept = [];
  for (const p of input) {
    const last = kept[kept.length - 1];
    if (last && Math.hypot(p[0] - last[0], p[1] - last[1]) < MIN_DISTANCE) continue;
    kept.push(p);
  }
  if (kept.length === 0) return { points: [], simulated: false };
  const hasPressure = kept.some(p => p[3] !== null && p[3] !== undefined && p[3] > 0);
  const pressures = hasPressure ? kept.map(p => Math.min(1, Math.max(0, p[3] ?? 0))) : simulatedPressures(kept);
  const out = [[kept[0][0], kept[0][1], pressures[0]]];
  for (let i = 0; i + 1 < kept.length; i++) {
    // At the ends, the missing neighbour is the end sample itself.
    const p0 = kept[Math.max(0, i - 1)], p1 = kept[i], p2 = kept[i + 1], p3 = kept[Math.min(kept.length - 1, i + 2)];
    const length = Math.hypot(p2[0] - p1[0], p2[1] - p1[1]);
    const steps = Math.min(MAX_SUBDIVISIONS, Math.max(1, Math.ceil(length / STEP)));
    for (let k = 1; k <= steps; k++) {
      const t = k / steps, t2 = t * t, t3 = t2 * t;
      // Uniform Catmull-Rom: passes through p1 and p2.
      const x = 0.5 * (2 * p1[0] + (p2[0] - p0[0]) * t + (2 * p0[0] - 5 * p1[0] + 4 * p2[0] - p3[0]) * t2 + (3 * p1[0] - p0[0] - 3 * p2[0] + p3[0]) * t3);
      const y = 0.5 * (2 * p1[1] + (p2[1] - p0[1]) * t + (2 * p0[1] - 5 * p1[1] + 4 * p2[1] - p3[1]) * t2 + (3 * p1[1] - p0[1] - 3 * p2[1] + p3[1]) * t3);
      out.push([x, y, pressures[i] + (pressures[i + 1] - pressures[i]) * t]);
    }
  }
  return { points: out, simulated: !hasPressure };
}

// The outline polygon [[x, y], ...] of a stroke `width` points wide.
export function outline(input, width, complete) {
  const { points, simulated } = centreLine(input);
  if (points.length === 0) return [];
  const radii = points.map(p => Math.max(0.25, width / 2 * (1 - THINNING + 2 * THINNING * p[2])));
  if (points.length === 1) {
    const [x, y] = points[0], r = radii[0], ring = [];
    for (let k = 0; k < 16; k++) ring.push([x + r * Math.cos(k * Math.PI / 8), y + r * Math.sin(k * Math.PI / 8)]);
    return ring;
  }
  // Distances along the line, for the tapers.
  const along = [0];
  for (let i = 1; i < points.length; i++) along.push(along[i - 1] + Math.hypot(points[i][0] - points[i - 1][0], points[i][1] - points[i - 1][1]));
  const total = along[along.length - 1];
  if (simulated) {
    const taper = Math.min(width * 2, total / 3);
    for (let i = 0; i < points.length; i++) {
      if (taper <= 0) break;
      const fromStart = along[i] / taper, fromEnd = (total - along[i]) / taper;
      let scale = 1;
      if (fromStart < 1) scale = Math.min(scale, 0.25 + 0.75 * fromStart * (2 - fromStart));
      if (complete && fromEnd < 1) scale = Math.min(scale, 0.25 + 0.75 * fromEnd * (2 - fromEnd));
      radii[i] = Math.max(0.25, radii[i] * scale);
    }
  }
  const left = [], right = [];
  const last = points.length - 1;
  let dx0 = 0, dy0 = 0, dxn = 0, dyn = 0;
  for (let i = 0; i <= last; i++) {
    const a = points[Math.max(0, i - 1)], b = points[Math.min(last, i + 1)];
    let dx = b[0] - a[0], dy = b[1] - a[1];
    const length = Math.hypot(dx, dy) || 1;
    dx /= length; dy /= length;
    if (i === 0) { dx0 = dx; dy0 = dy; }
    if (i === last) { dxn = dx; dyn = dy; }
    const r = radii[i];
    left.push([points[i][0] - dy * r, points[i][1] + dx * r]);
    right.push([points[i][0] + dy * r, points[i][1] - dx * r]);
  }
  const out = left.slice();
  // End cap: from the left side around the front to the right side.
  const end = points[last], rn = radii[last];
  for (let k = 1; k <= CAP_POINTS; k++) {
    const angle = Math.PI * k / (CAP_POINTS + 1);
    const c = Math.cos(angle), s = Math.sin(angle);
    // Rotate the left normal (−dy, dx) towards the direction (dx, dy).
    out.push([end[0] + rn * (-dyn * c + dxn * s), end[1] + rn * (dxn * c + dyn * s)]);
  }
  for (let i = last; i >= 0; i--) out.push(right[i]);
  // Start cap: from the right side around the back to the left side.
  const start = points[0], r0 = radii[0];
  for (let k = 1; k <= CAP_POINTS; k++) {
    const angle = Math.PI * k / (CAP_POINTS + 1);
    const c = Math.cos(angle), s = Math.sin(angle);
    out.push([start[0] + r0 * (dy0 * c - dx0 * s), start[1] + r0 * (-dx0 * c - dy0 * s)]);
  }
  return out;
}

function fixed(v) { return Math.round(v * 100) / 100; }

// An SVG path through the outline: quadratic curves through its points to
// the midpoints of the next (closed), the same string the SVG renderer writes.
export function pathData(polygon) {
  const n = polygon.length;
  if (n === 0) return '';
  const mid = (a, b) => [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2];
  const m0 = mid(polygon[0], polygon[1 % n]);
  let d = `M${fixed(m0[0])} ${fixed(m0[1])}`;
  for (let i = 1; i <= n; i++) {
    const p = polygon[i % n], m = mid(p, polygon[(i + 1) % n]);
    d += ` Q${fixed(p[0])} ${fixed(p[1])} ${fixed(m[0])} ${fixed(m[1])}`;
  }
  return d + ' Z';
}

// A stroke of the replica (flat [x, y, t, force] in the hub's fixed point)
// to ink points [x, y, t, pressure] in points and milliseconds.
export function inkPoints(flat, from = 0, units = 64) {
  const out = [];
  for (let k = from; k + 3 < flat.length; k += 4) {
    out.push([flat[k] / units, flat[k + 1] / units, flat[k + 2] / 1000, flat[k + 3] > 0 ? flat[k + 3] / 1024 : null]);
  }
  return out;
}

// The outline's bounds [minX, minY, maxX, maxY], for culling.
export function bounds(polygon) {
  let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
  for (const [x, y] of polygon) {
    if (x < minX) minX = x; if (y < minY) minY = y;
    if (x > maxX) maxX = x; if (y > maxY) maxY = y;
  }
  return [minX, minY, maxX, maxY];
}
