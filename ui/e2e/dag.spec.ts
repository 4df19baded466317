// The DAG drawing: a large workflow (beyond dagre, laid out by `layered`) comes out in
// ranks, every edge pointing down and no node on top of another.
import { expect, node, test, unique } from "./fixtures";

/** `ranks` ranks of `width` tasks; each task after the first rank depends on two above. */
function ranked(name: string, ranks: number, width: number) {
  const deps = new Map<string, string[]>();
  const lines = [`name: ${name}`, "tasks:"];
  for (let i = 0; i < ranks * width; i++) {
    const r = Math.floor(i / width);
    const up =
      r === 0
        ? []
        : [...new Set([(r - 1) * width + (i % width), (r - 1) * width + ((i + 5) % width)])].map((j) => `t${j}`);
    deps.set(`t${i}`, up);
    lines.push(`  - { name: t${i}, type: noop${up.length ? `, depends_on: [${up.join(", ")}]` : ""} }`);
  }
  return { yaml: lines.join("\n") + "\n", deps };
}

test("a 300-task DAG is drawn in ranks: edges point down, no node overlaps another", async ({ page, api, shot }) => {
  const wf = unique("large_dag");
  const { yaml, deps } = ranked(wf, 20, 15);
  await api.apply("default", yaml);
  await page.goto(`/projects/default/workflows/${wf}`);
  await expect(node(page, "t0 (noop)")).toBeVisible();
  const boxes = await page.locator(".react-flow__node").evaluateAll((els) =>
    Object.fromEntries(
      els.map((e) => {
        const r = e.getBoundingClientRect();
        return [e.getAttribute("data-id")!, { left: r.left, right: r.right, top: r.top, bottom: r.bottom }];
      }),
    ),
  );
  expect(Object.keys(boxes)).toHaveLength(300);
  for (const [task, ups] of deps)
    for (const up of ups) expect(boxes[up].bottom, `${up} is drawn above ${task}`).toBeLessThan(boxes[task].top);
  const list = Object.entries(boxes);
  const overlaps: string[] = [];
  for (let i = 0; i < list.length; i++)
    for (let j = i + 1; j < list.length; j++) {
      const [a, p] = list[i];
      const [b, q] = list[j];
      if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) overlaps.push(`${a}/${b}`);
    }
  expect(overlaps).toEqual([]);
  await shot("large-dag");
});
