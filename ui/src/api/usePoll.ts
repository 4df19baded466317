import { useCallback, useEffect, useRef, useState } from "react";

export interface Loaded<T> {
  data: T | undefined;
  error: Error | undefined;
  reload: () => void;
}

/**
 * Loads `load()` when `key` changes and again every `everyMs` while that is set (live
 * pages poll at ≤ 1 s). An answer that arrives after the key changed is dropped.
 */
export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, key: string, everyMs: number | null = null): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<Error>();
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const keyRef = useRef(key);

  useEffect(() => {
    if (keyRef.current !== key) {
      keyRef.current = key;
      setData(undefined);
      setError(undefined);
    }
    const ctl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const d = await loadRef.current(ctl.signal);
        if (ctl.signal.aborted) return;
        setData(d);
        setError(undefined);
      } catch (e) {
        if (ctl.signal.aborted) return;
        setError(e as Error);
      }
      if (everyMs !== null && !ctl.signal.aborted) timer = setTimeout(run, everyMs);
    };
    run();
    return () => {
      ctl.abort();
      if (timer) clearTimeout(timer);
    };
  }, [key, everyMs, tick]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, reload };
}
