// Draws a board through a viewport on a canvas: accepted strokes from a cached
// layer (new ones are added to it; a pan shifts it and draws only the strips
// it uncovers; a zoom scales it until the view rests, then redraws the
// visible strokes), strokes in progress lighter on top with their predicted
// tails, your own ink from your input, and a gray spot at each live touch.
import { outline, pathData, inkPoints, bounds } from './ink.js';

export const UNITS = 64;
const IN_PROGRESS_ALPHA = 0.55;   // strokes in progress and unacknowledged ink: lighter (seed 001)
const REBUILD_AFTER_MS = 140;     // a zoom redraws sharp once the view rested this long
const SELECTION_COLOUR = 'rgb(30,136,229)';

// In dark mode (the system's prefers-color-scheme) the board is dark, and a
// colour too dark to see on it (the palette's black) is drawn inverted, light,
// as tldraw and Excalidraw do; exports keep the board's own colours.
const darkScheme = typeof matchMedia === 'function' ? matchMedia('(prefers-color-scheme: dark)') : null;
export const isDark = () => darkScheme?.matches === true;
export function onSchemeChange(handler) { darkScheme?.addEventListener('change', handler); }

export function cssColor(rgba, alphaScale = 1) {
  let r = (rgba >>> 24) & 255, g = (rgba >>> 16) & 255, b = (rgba >>> 8) & 255;
  const a = (rgba & 255) / 255;
  if (isDark() && 0.2126 * r + 0.7152 * g + 0.0722 * b < 60) { r = 255 - r; g = 255 - g; b = 255 - b; }
  return `rgba(${r},${g},${b},${(a * alphaScale).toFixed(3)})`;
}

// A replica stroke's outline, cached on the stroke while its samples stay the same.
export function shapeOf(stroke, complete) {
  const key = stroke.s.length * 2 + (complete ? 1 : 0);
  if (stroke.shape && stroke.shape.key === key) return stroke.shape;
  const polygon = outline(inkPoints(stroke.s), stroke.w / UNITS, complete);
  const d = pathData(polygon);
  stroke.shape = { key, d, path: new Path2D(d), bounds: polygon.length ? bounds(polygon) : null };
  return stroke.shape;
}

// Local ink (points already in board points): its outline, cached by length.
export function localShapeOf(ink) {
  const key = ink.points.length * 2 + (ink.complete ? 1 : 0);
  if (ink.shape && ink.shape.key === key) return ink.shape;
  const polygon = outline(ink.points, ink.width, ink.complete);
  const d = pathData(polygon);
  ink.shape = { key, d, path: new Path2D(d), bounds: polygon.length ? bounds(polygon) : null };
  return ink.shape;
}

function intersects(a, b) { return a && a[0] <= b[2] && a[2] >= b[0] && a[1] <= b[3] && a[3] >= b[1]; }

export class Renderer {
  constructor(canvas, view) {
    this.canvas = canvas;
    this.view = view;
    this.ctx = canvas.getContext('2d');
    this.layer = document.createElement('canvas');
    this.layerCtx = this.layer.getContext('2d');
    this.scratch = document.createElement('canvas');
    this.layerView = null;       // {zoom, ox, oy} the layer was drawn at
    this.rebuildTimer = null;
    this.frameTimes = [];
    this.onRebuildDue = null;    // called when a rested zoom wants a sharp frame
    this.resize();
  }

  // The canvas backs its CSS box exactly, at the device pixel ratio.
  resize() {
    const ratio = window.devicePixelRatio || 1;
    const width = this.canvas.clientWidth, height = this.canvas.clientHeight;
    this.ratio = ratio;
    this.view.ratio = ratio;
    this.width = width;
    this.height = height;
    for (const c of [this.canvas, this.layer, this.scratch]) {
      c.width = Math.max(1, Math.round(width * ratio));
      c.height = Math.max(1, Math.round(height * ratio));
    }
    this.layerView = null;
  }

  viewTransform(ctx, v = this.view) {
    const r = this.ratio;
    ctx.setTransform(r * v.zoom, 0, 0, r * v.zoom, r * v.ox, r * v.oy);
  }

  drawStrokes(ctx, strokes, hidden, visible) {
    for (const stroke of strokes) {
      if (stroke.s.length === 0 || (hidden && hidden(stroke))) continue;
      const shape = shapeOf(stroke, true);
      if (visible && !intersects(shape.bounds, visible)) continue;
      ctx.fillStyle = cssColor(stroke.rgba);
      ctx.fill(shape.path);
    }
  }

  rebuildLayer(board, hidden) {
    const { layerCtx, layer } = this;
    layerCtx.setTransform(1, 0, 0, 1, 0, 0);
    layerCtx.clearRect(0, 0, layer.width, layer.height);
    this.viewTransform(layerCtx);
    this.drawStrokes(layerCtx, board.accepted, hidden, this.view.visible(this.width, this.height));
    this.layerView = { zoom: this.view.zoom, ox: this.view.ox, oy: this.view.oy };
  }

  // Same zoom, another offset: move the pixels, draw only what the move uncovered.
  shiftLayer(board, hidden) {
    const r = this.ratio, v = this.view, lv = this.layerView;
    const dx = Math.round(r * (v.ox - lv.ox)), dy = Math.round(r * (v.oy - lv.oy));
    const W = this.layer.width, H = this.layer.height;
    if (Math.abs(dx) >= W || Math.abs(dy) >= H) { this.rebuildLayer(board, hidden); return; }
    const s = this.scratch.getContext('2d');
    s.setTransform(1, 0, 0, 1, 0, 0);
    s.clearRect(0, 0, W, H);
    s.drawImage(this.layer, dx, dy);
    [this.layer, this.scratch] = [this.scratch, this.layer];
    this.layerCtx = this.layer.getContext('2d');
    const strips = [];
    if (dx > 0) strips.push([0, 0, dx, H]); else if (dx < 0) strips.push([W + dx, 0, -dx, H]);
    if (dy > 0) strips.push([0, 0, W, dy]); else if (dy < 0) strips.push([0, H + dy, W, -dy]);
    const ctx = this.layerCtx;
    for (const [x, y, w, h] of strips) {
      ctx.save();
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.beginPath();
      ctx.rect(x, y, w, h);
      ctx.clip();
      this.viewTransform(ctx);
      const [bx0, by0] = v.toBoard(x / r, y / r), [bx1, by1] = v.toBoard((x + w) / r, (y + h) / r);
      this.drawStrokes(ctx, board.accepted, hidden, [bx0, by0, bx1, by1]);
      ctx.restore();
    }
    this.layerView = { zoom: v.zoom, ox: v.ox, oy: v.oy };
  }

  // `scene`: {hidden: a predicate, accepted strokes not to draw, own: the user whose
  // replica strokes in progress are drawn from local ink instead (with
  // `ownTouches`, a Set of their touch ids), local: local ink to draw,
  // overlay: replica strokes drawn on top (a redo not yet echoed, an edit's preview), names: user -> name,
  // moving: {strokes, transform {dx, dy, scale, ox, oy}} a selection being dragged (its cached outlines
  // drawn through the transform: no outline is computed while it moves), selection: its box [x0, y0, x1, y1]
  // in points, marquee: the rectangle being dragged out, lasso: the loop being drawn, [x, y] points}.
  render(board, scene = {}) {
    const started = performance.now();
    const { ctx, ratio, view } = this;
    const hidden = scene.hidden;
    let scaled = false;
    if (!this.layerView || board.changedAccepted === 'all' || scene.rebuild) {
      this.rebuildLayer(board, hidden);
    } else if (this.layerView.zoom !== view.zoom) {
      scaled = true;   // draw the cached layer scaled now; sharp once the zoom rests
      clearTimeout(this.rebuildTimer);
      this.rebuildTimer = setTimeout(() => { this.layerView = null; this.onRebuildDue?.(); }, REBUILD_AFTER_MS);
    } else if (this.layerView.ox !== view.ox || this.layerView.oy !== view.oy) {
      this.shiftLayer(board, hidden);
    }
    if (board.changedAccepted !== 'all' && board.changedAccepted.length > 0) {
      this.viewTransform(this.layerCtx, this.layerView);
      this.drawStrokes(this.layerCtx, board.changedAccepted, hidden, null);
    }
    board.changedAccepted = [];

    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    if (scaled) {
      const s = view.zoom / this.layerView.zoom;
      ctx.setTransform(s, 0, 0, s, ratio * (view.ox - this.layerView.ox * s), ratio * (view.oy - this.layerView.oy * s));
    }
    ctx.drawImage(this.layer, 0, 0);
    this.viewTransform(ctx);

    for (const stroke of scene.overlay ?? []) {
      const shape = shapeOf(stroke, true);
      ctx.fillStyle = cssColor(stroke.rgba);
      ctx.fill(shape.path);
    }
    if (scene.moving) {
      const { strokes, transform: t } = scene.moving;
      ctx.save();
      ctx.translate(t.ox + t.dx, t.oy + t.dy);   // p ↦ origin + (p − origin) × scale + offset
      ctx.scale(t.scale, t.scale);
      ctx.translate(-t.ox, -t.oy);
      for (const stroke of strokes) {
        if (stroke.s.length === 0) continue;
        ctx.fillStyle = cssColor(stroke.rgba);
        ctx.fill(shapeOf(stroke, true).path);
      }
      ctx.restore();
    }
    const spots = [];
    for (const stroke of board.active.values()) {
      const n = stroke.s.length;
      if (n === 0) continue;
      const mine = stroke.owner === scene.own;
      if (mine && scene.ownTouches?.has(stroke.touch)) continue;   // drawn from local ink below
      ctx.fillStyle = cssColor(stroke.rgba, IN_PROGRESS_ALPHA);
      ctx.fill(shapeOf(stroke, false).path);
      if (stroke.p.length > 0) {             // the guess, replaced at the next event (seed 002)
        const tail = outline(inkPoints(stroke.s, n - 4).concat(inkPoints(stroke.p)), stroke.w / UNITS, false);
        ctx.fillStyle = cssColor(stroke.rgba, IN_PROGRESS_ALPHA / 2);
        ctx.fill(new Path2D(pathData(tail)));
      }
      spots.push({ x: stroke.s[n - 4] / UNITS, y: stroke.s[n - 3] / UNITS, name: mine ? null : scene.names?.get(stroke.owner) });
    }
    for (const ink of scene.local ?? []) {
      if (ink.points.length === 0) continue;
      ctx.fillStyle = cssColor(ink.rgba, ink.complete ? IN_PROGRESS_ALPHA + 0.2 : IN_PROGRESS_ALPHA);
      ctx.fill(localShapeOf(ink).path);
      if (ink.predicted.length > 0) {
        const last = ink.points[ink.points.length - 1];
        ctx.fillStyle = cssColor(ink.rgba, IN_PROGRESS_ALPHA / 2);
        ctx.fill(new Path2D(pathData(outline([last, ...ink.predicted], ink.width, false))));
      }
    }
    // A gray spot at each live touch of others (seed 000), the same size at any zoom, with the name.
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    for (const spot of spots) {
      const [x, y] = view.toScreen(spot.x, spot.y);
      ctx.fillStyle = 'rgba(128,128,128,0.30)';
      ctx.beginPath();
      ctx.arc(x, y, 16, 0, Math.PI * 2);
      ctx.fill();
      if (spot.name) {
        ctx.font = '12px system-ui, sans-serif';
        ctx.fillStyle = isDark() ? 'rgba(220,220,224,0.9)' : 'rgba(60,60,60,0.9)';
        ctx.fillText(spot.name, x + 18, y - 14);
      }
    }
    // The selection's box with its scale handle, and a marquee being dragged out (the same size at any zoom).
    if (scene.selection) {
      const [x0, y0] = view.toScreen(scene.selection[0], scene.selection[1]);
      const [x1, y1] = view.toScreen(scene.selection[2], scene.selection[3]);
      ctx.strokeStyle = SELECTION_COLOUR;
      ctx.lineWidth = 1;
      ctx.setLineDash([5, 3]);
      ctx.strokeRect(Math.round(x0) - 0.5, Math.round(y0) - 0.5, Math.round(x1 - x0) + 1, Math.round(y1 - y0) + 1);
      ctx.setLineDash([]);
      ctx.fillStyle = 'white';
      ctx.fillRect(x1 - 6, y1 - 6, 12, 12);
      ctx.strokeRect(x1 - 6 + 0.5, y1 - 6 + 0.5, 11, 11);
    }
    if (scene.marquee) {
      const [x0, y0] = view.toScreen(scene.marquee[0], scene.marquee[1]);
      const [x1, y1] = view.toScreen(scene.marquee[2], scene.marquee[3]);
      ctx.fillStyle = 'rgba(30,136,229,0.10)';
      ctx.fillRect(Math.min(x0, x1), Math.min(y0, y1), Math.abs(x1 - x0), Math.abs(y1 - y0));
      ctx.strokeStyle = SELECTION_COLOUR;
      ctx.lineWidth = 1;
      ctx.strokeRect(Math.min(x0, x1) + 0.5, Math.min(y0, y1) + 0.5, Math.abs(x1 - x0), Math.abs(y1 - y0));
    }
    if (scene.lasso && scene.lasso.length > 1) {
      ctx.beginPath();
      for (const [i, [x, y]] of scene.lasso.entries()) {
        const [sx, sy] = view.toScreen(x, y);
        if (i === 0) ctx.moveTo(sx, sy); else ctx.lineTo(sx, sy);
      }
      ctx.closePath();
      ctx.fillStyle = 'rgba(30,136,229,0.10)';
      ctx.fill();
      ctx.strokeStyle = SELECTION_COLOUR;
      ctx.lineWidth = 1;
      ctx.setLineDash([4, 3]);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    // Laser trails: a red line that fades over a second, thicker where newer
    // (segments end flat, so their overlaps do not darken; a dot at the head).
    ctx.lineCap = 'butt';
    for (const points of scene.lasers ?? []) {
      for (let i = 1; i < points.length; i++) {
        const a = points[i - 1], b = points[i];
        const fade = Math.max(0, 1 - b.age);
        if (fade <= 0) continue;
        const [ax, ay] = view.toScreen(a.x, a.y), [bx, by] = view.toScreen(b.x, b.y);
        ctx.strokeStyle = `rgba(255,45,45,${(0.9 * fade).toFixed(3)})`;
        ctx.lineWidth = 2 + 4 * fade;
        ctx.beginPath(); ctx.moveTo(ax, ay); ctx.lineTo(bx, by); ctx.stroke();
      }
      const head = points[points.length - 1];
      if (head && head.age < 1) {
        const [x, y] = view.toScreen(head.x, head.y);
        ctx.fillStyle = `rgba(255,45,45,${(0.9 * (1 - head.age)).toFixed(3)})`;
        ctx.beginPath(); ctx.arc(x, y, 4, 0, Math.PI * 2); ctx.fill();
      }
    }
    // Other people's pointers (presence): an arrow in their colour with their name, the same size at any zoom.
    for (const cursor of scene.cursors ?? []) {
      const [x, y] = view.toScreen(cursor.x, cursor.y);
      ctx.fillStyle = cursor.rgba !== null && cursor.rgba !== undefined ? cssColor(cursor.rgba | 255) : 'rgb(120,120,120)';
      ctx.beginPath();
      ctx.moveTo(x, y); ctx.lineTo(x, y + 17); ctx.lineTo(x + 4.5, y + 12.5); ctx.lineTo(x + 11.5, y + 12.5);
      ctx.closePath();
      ctx.fill();
      if (cursor.name) {
        ctx.font = '12px system-ui, sans-serif';
        const w = ctx.measureText(cursor.name).width + 10;
        ctx.fillRect(x + 10, y + 16, w, 18);
        ctx.fillStyle = 'white';
        ctx.fillText(cursor.name, x + 15, y + 29);
      }
    }
    const took = performance.now() - started;
    this.frameTimes.push(took);
    if (this.frameTimes.length > 4000) this.frameTimes.splice(0, 2000);
    return took;
  }
}
