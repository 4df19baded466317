import { useCallback, useEffect, useRef, useState } from "react";

export interface Loaded<T> {
  data: T | undefined;
  error: Error | undefined;
  reload: () => void;
}

/**
 * Loads `load()` when `key` changes and again every `everyMs` while that is set (live
 * pages poll at ≤ 1 s). A hidden tab does not poll: it loads again as soon as it is shown.
 * An answer that arrives after the key changed is dropped.
 */
export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, key: string, everyMs: number | null = null): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<Error>();
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const keyRef = useRef(key);
  // The last answer as JSON: an unchanged answer keeps the same object, so a live page
  // whose data did not change does not render again.
  const lastJson = useRef<string | undefined>(undefined);

  useEffect(() => {
    if (keyRef.current !== key) {
      keyRef.current = key;
      lastJson.current = undefined;
      setData(undefined);
      setError(undefined);
    }
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let loading = false;
    const run = async () => {
      timer = undefined;
      if (loading || (everyMs !== null && document.hidden)) return; // onVisible starts it again
      loading = true;
      try {
        const d = await loadRef.current(ctl.signal);
        if (ctl.signal.aborted) return;
        const json = JSON.stringify(d);
        if (json !== lastJson.current) {
          lastJson.current = json;
          setData(d);
        }
        setError(undefined);
      } catch (e) {
        if (ctl.signal.aborted) return;
        setError(e as Error);
      } finally {
        loading = false;
      }
      if (everyMs !== null && !ctl.signal.aborted) timer = setTimeout(run, everyMs);
    };
    const onVisible = () => {
      if (document.hidden || everyMs === null || loading) return;
      if (timer) clearTimeout(timer);
      run();
    };
    run();
    document.addEventListener("visibilitychange", onVisible);
    return () => {
      ctl.abort();
      if (timer) clearTimeout(timer);
      document.removeEventListener("visibilitychange", onVisible);
    };
  }, [key, everyMs, tick]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, reload };
}
