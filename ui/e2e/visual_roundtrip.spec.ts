// The visual editor keeps every field: each example workflow of docs/reference.md is taken
// apart into the canvas's model (its tasks, their edges, the workflow's own fields, a
// do_while's body) and put together again by the editor's own operations (add each task,
// draw each edge). The
// server must find the result equal to the original: applying it after the original
// stores no new version (the store compares the parsed, normalized definitions).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { addTask, connect, fragment, read, TOP, type FieldPath, type Task } from "../src/visual/definition";
import { expect, test, unique, type Api } from "./fixtures";

/** The YAML examples of the reference that define tasks, as complete definitions. */
function examples(testDir: string): { title: string; text: string }[] {
  const doc = readFileSync(join(testDir, "..", "..", "docs", "reference.md"), "utf8");
  const out: { title: string; text: string }[] = [];
  for (const [i, m] of [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].entries()) {
    const block = m[1];
    const value = parse(block) as unknown;
    const name = `rt_${i}_${unique("x").slice(2)}`;
    let text: string;
    if (Array.isArray(value)) {
      text = `name: ${name}\ntasks:\n${block.replace(/^/gm, "  ")}`;
    } else if (value && typeof value === "object" && "tasks" in value) {
      text = /^name: /m.test(block) ? block.replace(/^name: .*$/m, `name: ${name}`) : `name: ${name}\n${block}`;
    } else continue; // a fragment without tasks (a trigger's form)
    out.push({ title: `example ${i}: ${block.split("\n")[0]}`, text });
  }
  return out;
}

/**
 * The definition rebuilt from the canvas's model by the editor's operations: each task
 * added, then each edge drawn, in the workflow's list and in each do_while's body.
 */
function throughCanvas(text: string): string {
  const model = read(text);
  if ("error" in model) throw new Error(model.error);
  let out = fragment({ ...model.def, tasks: [] });
  const build = (tasks: Task[], scope: FieldPath) => {
    tasks.forEach(({ depends_on, ...task }, i) => {
      void depends_on;
      const loop = task.do_while as { tasks?: Task[] } | undefined;
      out = addTask(out, loop?.tasks ? { ...task, do_while: { ...loop, tasks: [] } } : task, scope);
      if (loop?.tasks) build(loop.tasks, [...scope, i, "do_while", "tasks"]);
    });
    for (const t of tasks) for (const d of t.depends_on ?? []) out = connect(out, d, t.name, scope);
  };
  build(model.tasks, TOP);
  return out;
}

/** What the examples name: a task group, alert channels, environments. */
async function prerequisites(api: Api) {
  const ok = (s: number) => expect([200, 201, 409]).toContain(s);
  ok((await api.post("/task-groups", { name: "etl_db", slots: 2 })).status());
  for (const channel of ["ops", "audit", "mail"])
    ok((await api.post("/alert-channels", { name: channel, type: "log" })).status());
  for (const env of ["jdk17", "venv"]) {
    const res = await api.request.put(`/api/v1/projects/default/environments/${env}`, {
      headers: api.token ? { Authorization: `Bearer ${api.token}` } : {},
      data: { config: "true" },
    });
    ok(res.status());
  }
}

test("every example workflow survives YAML → canvas → YAML unchanged", async ({ api }, info) => {
  await prerequisites(api);
  const all = examples(info.project.testDir);
  expect(all.length).toBeGreaterThanOrEqual(15);
  for (const { title, text } of all) {
    const first = await api.apply("default", text);
    const rebuilt = throughCanvas(text);
    expect(rebuilt, title).not.toBe(text);
    const res = await api.request.post("/api/v1/projects/default/workflows", {
      headers: { "Content-Type": "application/yaml", ...(api.token ? { Authorization: `Bearer ${api.token}` } : {}) },
      data: rebuilt,
    });
    expect(res.status(), `${title}: ${await res.text()}\n${rebuilt}`).toBe(200);
    expect(await res.json(), title).toMatchObject({ version: first.version, created: false });
  }
});
