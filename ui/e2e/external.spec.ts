// An external task from the browser: the instance page shows its queue while it waits,
// then the worker that took it (this test, polling the API) and its lease; the Cluster
// page lists the queue with the task taken and the worker seen; the worker's log line shows
// live and its completion ends the run.
import { expect, instanceState, readTable, test, unique } from "./fixtures";

interface Taken {
  task_instance_id: number;
  lease_token: string;
  queue: string;
}

test("an external task shows its queue and worker, and the cluster page its queue", async ({ page, api, shot }) => {
  const wf = unique("external");
  const queue = unique("images");
  const worker = unique("resizer");
  await api.apply(
    "default",
    `name: ${wf}
tasks:
  - { name: resize, type: external, queue: ${queue}, lease: 5m, params: { size: "640" } }
  - { name: ship, type: shell, depends_on: [resize], command: 'echo "shipped at \${width}"' }
`,
  );
  const id = await api.start("default", wf);
  await page.goto(`/instances/${id}`);
  const offer = page.getByLabel("Waiting task resize").getByLabel("External offer of resize");
  await expect(offer).toContainText(`Queue ${queue}`);
  await expect(offer).toContainText("waiting for an external worker to take it");

  // Take it as an external worker would.
  let task: Taken | undefined;
  await expect
    .poll(
      async () => {
        const res = await api.post("/external/poll", { queues: [queue], worker, max: 1, wait: "2s" });
        expect(res.status(), await res.text()).toBe(200);
        [task] = (await res.json()) as Taken[];
        return task?.queue;
      },
      { message: "the external task is offered", timeout: 30_000 },
    )
    .toBe(queue);
  const taken = task!;
  await expect(offer).toContainText(`taken by external worker ${worker}`);
  await expect(offer).toContainText("lease expires");
  const tasks = page.getByRole("table", { name: "Tasks" });
  await expect.poll(async () => (await readTable(tasks)).find((r) => r.task.startsWith("resize"))?.worker).toBe(worker);
  await expect(tasks.getByRole("row").filter({ hasText: "resize" })).toContainText(`queue ${queue}`);

  // Its log line shows live in the task's panel, which names the queue and worker too.
  const log = await api.post(`/external/${taken.task_instance_id}/log`, {
    lease_token: taken.lease_token,
    text: "resizing to 640 px\n",
  });
  expect(log.status(), await log.text()).toBe(204);
  await tasks.getByRole("button", { name: "resize", exact: true }).click();
  const panel = page.getByRole("region", { name: "Task log of resize" });
  await expect(panel.getByLabel("External offer of resize")).toContainText(`taken by external worker ${worker}`);
  await expect(panel.getByRole("log", { name: "Log of resize" })).toContainText("resizing to 640 px");
  await shot("external-task-taken");

  await page.goto("/cluster");
  const queues = page.getByRole("table", { name: "External queues" });
  await expect
    .poll(async () => (await readTable(queues)).find((r) => r.queue === queue))
    .toMatchObject({ project: "default", waiting: "0", taken: "1" });
  const row = queues.getByRole("row", { name: `Queue default/${queue}` });
  await expect(row).toContainText(`${worker} holds 1 · seen`);
  await shot("cluster-external-queues");

  const done = await api.post(`/external/${taken.task_instance_id}/complete`, {
    lease_token: taken.lease_token,
    outputs: { width: 640 },
    message: "resized",
  });
  expect(done.status(), await done.text()).toBe(200);
  await expect.poll(async () => (await readTable(queues)).find((r) => r.queue === queue)?.taken).toBe("0");
  await expect(row).toContainText(`${worker} seen`);

  await page.goto(`/instances/${id}`);
  await expect(instanceState(page)).toHaveText("success");
  await expect(page.getByRole("region", { name: "Waiting tasks" })).toHaveCount(0);
  const ship = (await api.instance(id)).tasks.find((t) => t.name === "ship")!;
  expect(await (await api.get(`/task-instances/${ship.id}/log`)).text()).toContain("shipped at 640");
  await shot("external-task-done");
});
