// Pan and zoom input: the wheel (a trackpad's two-finger scroll pans, its
// pinch arrives as a wheel event with ctrlKey and zooms), and pointers that
// pan (one) or pan and pinch (two or more, about their centre).

// The zoom factor of a wheel event with Ctrl (or ⌘), as tldraw and Excalidraw
// scale them apart: a mouse wheel's notch (lines or pages, or 50 pixels and
// more at once) is one step of 10%, at most three at once; a trackpad pinch
// (a stream of small pixel deltas) zooms continuously, at most 25% an event.
export const ZOOM_STEP = 1.1;
export function wheelZoom(deltaY, deltaMode = 0) {
  if (deltaY === 0) return 1;
  const notches = deltaMode === 1 ? Math.abs(deltaY) / 3 : deltaMode === 2 ? Math.abs(deltaY) : Math.abs(deltaY) >= 50 ? Math.abs(deltaY) / 100 : 0;
  if (notches > 0) return Math.pow(ZOOM_STEP, -Math.sign(deltaY) * Math.min(Math.max(notches, 1), 3));
  return Math.min(1.25, Math.max(0.8, Math.exp(-deltaY * 0.01)));
}

// Wheel and trackpad on `element`: pans or zooms `view`, then calls onChange.
export function attachWheel(element, view, onChange) {
  element.addEventListener('wheel', e => {
    e.preventDefault();
    const rect = element.getBoundingClientRect();
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? rect.height : 1;
    if (e.ctrlKey || e.metaKey) {
      view.zoomAt(wheelZoom(e.deltaY, e.deltaMode), e.clientX - rect.left, e.clientY - rect.top);
    } else {
      view.panBy(-e.deltaX * unit, -e.deltaY * unit);
    }
    onChange();
  }, { passive: false });
}

// Pointers moving the view. When a pointer lands or lifts, the board point
// under their centre, their spread and the zoom are noted; each move then
// places that board point under the new centre, zoomed by the spread's change
// since. The view follows from the gesture's start, not move by move, so the
// board stays exactly under the fingers (no drift from one finger moving
// before the other, or from snapping to device pixels).
export class PanPinch {
  constructor(view) { this.view = view; this.points = new Map(); this.start = null; }
  get size() { return this.points.size; }
  has(id) { return this.points.has(id); }

  centre() {
    let x = 0, y = 0;
    for (const p of this.points.values()) { x += p[0]; y += p[1]; }
    return [x / this.points.size, y / this.points.size];
  }

  spread() {
    const [cx, cy] = this.centre();
    let total = 0;
    for (const p of this.points.values()) total += Math.hypot(p[0] - cx, p[1] - cy);
    return total / this.points.size;
  }

  add(id, x, y) { this.points.set(id, [x, y]); this.anchor(); }
  remove(id) { this.points.delete(id); this.anchor(); }

  anchor() {
    if (this.points.size === 0) { this.start = null; return; }
    const [cx, cy] = this.centre();
    this.start = { board: this.view.toBoard(cx, cy), spread: this.spread(), zoom: this.view.zoom };
  }

  move(id, x, y) {
    if (!this.points.has(id)) return false;
    this.points.set(id, [x, y]);
    const [cx, cy] = this.centre(), spread = this.spread();
    const { board, spread: spread0, zoom } = this.start;
    const pinching = this.points.size > 1 && spread0 > 4 && spread > 4;
    this.view.place(board[0], board[1], cx, cy, pinching ? zoom * spread / spread0 : this.view.zoom);
    return true;
  }
}

// For pages that only look (the replay): every pointer pans and pinches.
export function attachPanZoom(canvas, view, { onChange }) {
  attachWheel(canvas, view, onChange);
  const moving = new PanPinch(view);
  const at = e => { const r = canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  canvas.addEventListener('pointerdown', e => { canvas.setPointerCapture?.(e.pointerId); moving.add(e.pointerId, ...at(e)); });
  canvas.addEventListener('pointermove', e => { if (moving.move(e.pointerId, ...at(e))) onChange(); });
  for (const type of ['pointerup', 'pointercancel']) canvas.addEventListener(type, e => moving.remove(e.pointerId));
}
