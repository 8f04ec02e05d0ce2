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

// Pointers moving the view: each move pans by the change of their centre and
// zooms by the change of their spread.
export class PanPinch {
  constructor(view) { this.view = view; this.points = new Map(); }
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

  add(id, x, y) { this.points.set(id, [x, y]); }
  remove(id) { this.points.delete(id); }

  move(id, x, y) {
    if (!this.points.has(id)) return false;
    const [cx0, cy0] = this.centre(), spread0 = this.spread();
    this.points.set(id, [x, y]);
    const [cx1, cy1] = this.centre(), spread1 = this.spread();
    this.view.panBy(cx1 - cx0, cy1 - cy0);
    if (this.points.size > 1 && spread0 > 4 && spread1 > 4) this.view.zoomAt(spread1 / spread0, cx1, cy1);
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
