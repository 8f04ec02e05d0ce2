// Assertions for the page's unit tests: each throws with what differs.
export function equal(actual, expected, what = 'value') {
  const a = JSON.stringify(actual), e = JSON.stringify(expected);
  if (a !== e) throw new Error(`${what}: ${a} is not ${e}`);
}
export function near(actual, expected, tolerance, what = 'value') {
  if (!(Math.abs(actual - expected) <= tolerance)) throw new Error(`${what}: ${actual} is not ${expected} ± ${tolerance}`);
}
export function ok(condition, what) { if (!condition) throw new Error(what); }
export function throws(run, what) {
  try { run(); } catch { return; }
  throw new Error(`${what}: did not throw`);
}
