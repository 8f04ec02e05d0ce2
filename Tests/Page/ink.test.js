import { centreLine, outline, bounds, inkPoints, STEP } from './ink.js';
import { ok, near, equal } from './check.js';

export const tests = [
  ['the centre line passes through every sample, about STEP apart', () => {
    const input = [[0, 0, 0, 0.5], [40, 0, 10, 0.5], [40, 40, 20, 0.5]];
    const { points, simulated } = centreLine(input);
    equal(simulated, false, 'pressure given');
    for (const [x, y] of input) ok(points.some(p => Math.hypot(p[0] - x, p[1] - y) < 1e-9), `through (${x}, ${y})`);
    // Subdivided by each span's chord, so a curve's points may stand a little further apart.
    for (let i = 1; i < points.length; i++) ok(Math.hypot(points[i][0] - points[i - 1][0], points[i][1] - points[i - 1][1]) <= STEP * 1.5, 'step');
    ok(points.length >= 80 / STEP, `${points.length} points for 80 points of line`);
  }],
  ['the outline is as wide as the stroke, wider where pressed harder', () => {
    const light = bounds(outline([[0, 0, 0, 0.1], [100, 0, 50, 0.1]], 10, true));
    const heavy = bounds(outline([[0, 0, 0, 1], [100, 0, 50, 1]], 10, true));
    const lightWidth = light[3] - light[1], heavyWidth = heavy[3] - heavy[1];
    ok(heavyWidth > lightWidth * 2, `heavy ${heavyWidth}, light ${lightWidth}`);
    near(heavyWidth, 10 * (1 + 0.6), 1, 'full pressure: width × (1 + thinning)');
    ok(light[0] < 0 && light[2] > 100, 'round caps beyond the ends');
  }],
  ['a mouse (no pressure) simulates it from speed: slower is wider', () => {
    const slow = bounds(outline([[0, 0, 0, null], [10, 0, 100, null], [20, 0, 200, null], [30, 0, 300, null]], 10, false));
    const fast = bounds(outline([[0, 0, 0, null], [100, 0, 1, null], [200, 0, 2, null], [300, 0, 3, null]], 10, false));
    ok(slow[3] - slow[1] > fast[3] - fast[1], `slow ${slow[3] - slow[1]}, fast ${fast[3] - fast[1]}`);
  }],
  ['replica samples become points, milliseconds and pressure', () => {
    equal(inkPoints([640, 1280, 16000, 512, 704, 1312, 32000, 0]), [[10, 20, 16, 0.5], [11, 20.5, 32, null]], 'points');
  }],
];
