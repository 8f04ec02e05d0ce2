// The viewport of the infinite board: screen = board × zoom + offset, in CSS
// pixels. Board coordinates are the protocol's points, so every user sees a
// stroke at the same board place whatever their zoom.

export const MIN_ZOOM = 0.05;
export const MAX_ZOOM = 20;

export class Viewport {
  constructor() {
    this.zoom = 1;
    this.ox = 0;
    this.oy = 0;
    this.ratio = 1;      // device pixels per CSS pixel: offsets snap to whole device pixels
    this.version = 0;    // bumped at every change, for renderers and tests
  }

  toBoard(sx, sy) { return [(sx - this.ox) / this.zoom, (sy - this.oy) / this.zoom]; }
  toScreen(bx, by) { return [bx * this.zoom + this.ox, by * this.zoom + this.oy]; }

  snap(v) { return Math.round(v * this.ratio) / this.ratio; }

  panBy(dx, dy) {
    if (dx === 0 && dy === 0) return;
    this.ox = this.snap(this.ox + dx);
    this.oy = this.snap(this.oy + dy);
    this.version++;
  }

  // Zooms by `factor` keeping the board point under (sx, sy) in place.
  zoomAt(factor, sx, sy) {
    const zoom = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, this.zoom * factor));
    if (zoom === this.zoom) return;
    const [bx, by] = this.toBoard(sx, sy);
    this.zoom = zoom;
    this.ox = this.snap(sx - bx * zoom);
    this.oy = this.snap(sy - by * zoom);
    this.version++;
  }

  // Puts board point (bx, by) at screen point (sx, sy) at `zoom` (clamped).
  place(bx, by, sx, sy, zoom) {
    const z = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, zoom));
    const ox = this.snap(sx - bx * z), oy = this.snap(sy - by * z);
    if (z === this.zoom && ox === this.ox && oy === this.oy) return;
    this.zoom = z;
    this.ox = ox;
    this.oy = oy;
    this.version++;
  }

  // Shows the board rectangle [minX, minY, maxX, maxY] whole in a width × height screen.
  fit(rect, width, height, margin = 24) {
    if (!rect || !(rect[2] > rect[0]) || !(rect[3] > rect[1])) { this.reset(); return; }
    const zoom = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM,
      Math.min((width - 2 * margin) / (rect[2] - rect[0]), (height - 2 * margin) / (rect[3] - rect[1]))));
    this.zoom = Math.min(zoom, 4);
    this.ox = this.snap(width / 2 - (rect[0] + rect[2]) / 2 * this.zoom);
    this.oy = this.snap(height / 2 - (rect[1] + rect[3]) / 2 * this.zoom);
    this.version++;
  }

  reset() { this.zoom = 1; this.ox = 0; this.oy = 0; this.version++; }

  // The board rectangle a width × height screen shows.
  visible(width, height) {
    const [x0, y0] = this.toBoard(0, 0), [x1, y1] = this.toBoard(width, height);
    return [x0, y0, x1, y1];
  }
}
