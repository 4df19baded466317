// Where a waiting external task is offered and who holds it: its queue, then the external
// worker that took it and when its lease lapses without a heartbeat.
import type { TaskInstance } from "../api/types";
import { when } from "./format";

export function ExternalOffer({ task }: { task: TaskInstance }) {
  const offer = task.external;
  if (!offer) return null;
  return (
    <p className="external-offer" aria-label={`External offer of ${task.name}`}>
      Queue <code>{offer.queue}</code> ·{" "}
      {offer.worker ? (
        <>
          taken by external worker <code>{offer.worker}</code> · lease expires {when(offer.lease_expires_at)}
        </>
      ) : (
        <span className="muted">waiting for an external worker to take it</span>
      )}
    </p>
  );
}
