import { Viewport, MIN_ZOOM, MAX_ZOOM } from './view.js';
import { equal, near, ok } from './check.js';

export const tests = [
  ['board and screen points map both ways', () => {
    const view = new Viewport();
    view.zoomAt(2.5, 100, 50);
    view.panBy(30, -20);
    const [bx, by] = view.toBoard(400, 300);
    const [sx, sy] = view.toScreen(bx, by);
    near(sx, 400, 1e-9, 'x'); near(sy, 300, 1e-9, 'y');
  }],
  ['zooming keeps the board point under the pointer', () => {
    const view = new Viewport();
    view.panBy(-120, 40);
    const before = view.toBoard(333, 222);
    view.zoomAt(1.7, 333, 222);
    const after = view.toScreen(...before);
    near(after[0], 333, 0.5, 'x'); near(after[1], 222, 0.5, 'y');
    near(view.zoom, 1.7, 1e-9, 'zoom');
  }],
  ['zoom stays within its bounds', () => {
    const view = new Viewport();
    for (let i = 0; i < 100; i++) view.zoomAt(2, 0, 0);
    equal(view.zoom, MAX_ZOOM, 'most');
    for (let i = 0; i < 200; i++) view.zoomAt(0.5, 0, 0);
    equal(view.zoom, MIN_ZOOM, 'least');
  }],
  ['fit shows the whole rectangle, centred', () => {
    const view = new Viewport();
    view.fit([100, 200, 1100, 700], 800, 600);
    const [x0, y0, x1, y1] = view.visible(800, 600);
    ok(x0 <= 100 && y0 <= 200 && x1 >= 1100 && y1 >= 700, `visible ${[x0, y0, x1, y1]}`);
    const centre = view.toScreen(600, 450);
    near(centre[0], 400, 1, 'centre x'); near(centre[1], 300, 1, 'centre y');
  }],
  ['offsets snap to whole device pixels', () => {
    const view = new Viewport();
    view.ratio = 2;
    view.panBy(0.3, 0.8);
    equal([view.ox, view.oy], [0.5, 1], 'offset');
  }],
];
