// A fast layered layout for large DAGs, where dagre takes most of a second: ranks by the
// longest path from the roots, the order within a rank from a few barycenter sweeps
// (fewer crossings), each rank centred. Linear in nodes + edges per sweep.

const SWEEPS = 4;

/** Top-left corner of each node, by index of `count` nodes; `edges` are [from, to] indexes. */
export function layered(
  count: number,
  edges: [number, number][],
  size: { width: number; height: number; gapX: number; gapY: number },
): { x: number; y: number }[] {
  const ups: number[][] = Array.from({ length: count }, () => []);
  const downs: number[][] = Array.from({ length: count }, () => []);
  for (const [a, b] of edges) {
    downs[a].push(b);
    ups[b].push(a);
  }
  // Ranks in topological order (Kahn). A validated definition has no cycle; a node on one
  // would never be reached, so it goes to the top rank rather than vanish.
  const waiting = ups.map((u) => u.length);
  const rank = new Array<number>(count).fill(0);
  const order = [...Array(count).keys()].filter((i) => waiting[i] === 0);
  for (let q = 0; q < order.length; q++) {
    const i = order[q];
    for (const j of downs[i]) {
      rank[j] = Math.max(rank[j], rank[i] + 1);
      if (--waiting[j] === 0) order.push(j);
    }
  }
  const reached = new Set(order);
  for (let i = 0; i < count; i++) if (!reached.has(i)) order.push(i);
  const ranks: number[][] = [];
  for (const i of order) (ranks[rank[i]] ??= []).push(i);

  const slot = new Float64Array(count);
  ranks.forEach((r) => r.forEach((i, k) => (slot[i] = k)));
  const barycenter = (i: number, neighbours: number[]) =>
    neighbours.length ? neighbours.reduce((s, j) => s + slot[j], 0) / neighbours.length : slot[i];
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    const down = sweep % 2 === 0;
    const pass = down ? ranks.slice(1) : ranks.slice(0, -1).reverse();
    for (const r of pass) {
      const key = new Map(r.map((i) => [i, barycenter(i, down ? ups[i] : downs[i])]));
      r.sort((a, b) => key.get(a)! - key.get(b)!);
      r.forEach((i, k) => (slot[i] = k));
    }
  }

  const { width, height, gapX, gapY } = size;
  const out = new Array<{ x: number; y: number }>(count);
  ranks.forEach((r, y) => {
    const span = r.length * (width + gapX) - gapX;
    r.forEach((i, k) => (out[i] = { x: k * (width + gapX) - span / 2, y: y * (height + gapY) }));
  });
  return out;
}
