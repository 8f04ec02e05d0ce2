import { wheelZoom, PanPinch, ZOOM_STEP } from './gestures.js';
import { Viewport } from './view.js';
import { near, equal } from './check.js';

export const tests = [
  ['a mouse notch is one step, whatever the unit', () => {
    near(wheelZoom(-100), ZOOM_STEP, 1e-12, 'pixels, in');
    near(wheelZoom(100), 1 / ZOOM_STEP, 1e-12, 'pixels, out');
    near(wheelZoom(-3, 1), ZOOM_STEP, 1e-12, 'lines');
    near(wheelZoom(-1, 2), ZOOM_STEP, 1e-12, 'pages');
  }],
  ['several notches at once are several steps, at most three', () => {
    near(wheelZoom(-300), ZOOM_STEP ** 3, 1e-12, 'three');
    near(wheelZoom(-1200), ZOOM_STEP ** 3, 1e-12, 'twelve');
  }],
  ['a pinch zooms continuously and boundedly', () => {
    near(wheelZoom(-4), Math.exp(0.04), 1e-12, 'a small pinch');
    near(wheelZoom(2), Math.exp(-0.02), 1e-12, 'out');
    near(wheelZoom(-49), 1.25, 1e-12, 'at most 25% an event');
    equal(wheelZoom(0), 1, 'nothing');
  }],
  ['two fingers panning keep the board under them', () => {
    const view = new Viewport();
    const moving = new PanPinch(view);
    moving.add(1, 100, 300);
    moving.add(2, 200, 300);
    const under = view.toBoard(100, 300);
    for (let step = 1; step <= 10; step++) {
      moving.move(1, 100 + step * 20, 300 + step * 7);
      moving.move(2, 200 + step * 20, 300 + step * 7);
    }
    const now = view.toScreen(...under);
    near(now[0], 300, 0.5, 'x'); near(now[1], 370, 0.5, 'y');
    near(view.zoom, 1, 1e-9, 'no zoom');
  }],
  ['spreading two fingers zooms about them', () => {
    const view = new Viewport();
    const moving = new PanPinch(view);
    moving.add(1, 300, 300);
    moving.add(2, 400, 300);
    const under = view.toBoard(300, 300);
    moving.move(1, 250, 300);
    moving.move(2, 450, 300);
    near(view.zoom, 2, 0.05, 'zoom');
    const now = view.toScreen(...under);
    near(now[0], 250, 2, 'the first finger\'s board point follows it');
  }],
];
