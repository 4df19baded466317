// One operator action at a time (a button's request): busy while it runs, its refusal or
// failure as text, and what to do once it succeeded.
import { useState } from "react";
import { actionError } from "../components/format";

export function useAction(onDone?: () => void) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  /** Runs `act`; true when it succeeded (then `onDone` was called). */
  const run = async (act: () => Promise<unknown>): Promise<boolean> => {
    setBusy(true);
    setError("");
    try {
      await act();
      onDone?.();
      return true;
    } catch (e) {
      setError(actionError(e));
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, setError, run };
}
