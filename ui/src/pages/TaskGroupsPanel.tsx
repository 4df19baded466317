// Task groups on the cluster page: their slots in use, and (global admins) create and delete.
import { useState } from "react";
import { $api, every, invalidate } from "../api/cache";
import { api } from "../api/client";
import { useAction } from "../api/useAction";
import { NamedTable, NewNamedForm } from "../components/NamedTable";

export function TaskGroupsPanel({ manage }: { manage: boolean }) {
  const groups = $api.useQuery("get", "/api/v1/task-groups", {}, every(2000));
  const [name, setName] = useState("");
  const [slots, setSlots] = useState("1");
  const [description, setDescription] = useState("");
  const { busy, error, run } = useAction(() => invalidate("/api/v1/task-groups"));
  const create = async () => {
    if (await run(() => api.POST("/api/v1/task-groups", { body: { name, slots: Number(slots), description } }))) {
      setName("");
      setDescription("");
    }
  };
  return (
    <div>
      <NamedTable
        title="Task groups"
        noun="task group"
        headers={["In use / slots", "Waiting", "Description"]}
        rows={groups.data}
        cells={(g) => (
          <>
            <td>
              {g.in_use} / {g.slots}
            </td>
            <td>{g.waiting}</td>
            <td>{g.description}</td>
          </>
        )}
        error={error || groups.error}
        empty="No task groups: a workflow's task names one with `task_group` to share its slots."
        busy={busy}
        onDelete={
          manage
            ? (g) => run(() => api.DELETE("/api/v1/task-groups/{name}", { params: { path: { name: g.name } } }))
            : undefined
        }
      />
      {manage && (
        <NewNamedForm noun="task group" name={name} setName={setName} busy={busy} onCreate={create}>
          <label>
            Slots
            <input type="number" min={1} value={slots} onChange={(e) => setSlots(e.target.value)} required />
          </label>
          <label>
            Description
            <input value={description} onChange={(e) => setDescription(e.target.value)} />
          </label>
        </NewNamedForm>
      )}
    </div>
  );
}
