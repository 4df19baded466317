// A small history-API router: every page is a URL that survives reload and bookmarks.
import { useEffect, useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from "react";

const listeners = new Set<() => void>();
window.addEventListener("popstate", () => listeners.forEach((l) => l()));

function subscribe(l: () => void) {
  listeners.add(l);
  return () => {
    listeners.delete(l);
  };
}

export function navigate(to: string, replace = false) {
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  listeners.forEach((l) => l());
  window.scrollTo(0, 0);
}

/** The current location as `pathname + search`. */
export function useLocation(): { path: string; search: URLSearchParams } {
  const href = useSyncExternalStore(subscribe, () => location.pathname + location.search);
  const url = new URL(href, location.origin);
  return { path: url.pathname, search: url.searchParams };
}

/** Matches `/a/:b/c` against a path; returns the decoded params or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split("/");
  const s = path.replace(/\/+$/, "").split("/");
  if (p.length !== s.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(":")) {
      if (!s[i]) return null;
      out[p[i].slice(1)] = decodeURIComponent(s[i]);
    } else if (p[i] !== s[i]) return null;
  }
  return out;
}

/** Replaces the query string without a new history entry (filters, paging). */
export function useQueryState(): [URLSearchParams, (next: Record<string, string>) => void] {
  const { path, search } = useLocation();
  const set = (next: Record<string, string>) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(next)) if (v) q.set(k, v);
    const qs = q.toString();
    navigate(qs ? `${path}?${qs}` : path, true);
  };
  return [search, set];
}

export function Link({ href, onClick, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  const click = (e: MouseEvent<HTMLAnchorElement>) => {
    onClick?.(e);
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
    e.preventDefault();
    navigate(href);
  };
  return <a href={href} onClick={click} {...rest} />;
}

export function useTitle(title: string) {
  useEffect(() => {
    document.title = `${title} · shoal`;
  }, [title]);
}

export const path = {
  project: (p: string) => `/projects/${encodeURIComponent(p)}`,
  workflows: (p: string) => `/projects/${encodeURIComponent(p)}/workflows`,
  workflow: (p: string, w: string, tab = "") =>
    `/projects/${encodeURIComponent(p)}/workflows/${encodeURIComponent(w)}${tab ? `/${tab}` : ""}`,
  newWorkflow: (p: string) => `/projects/${encodeURIComponent(p)}/workflows/new`,
  instance: (id: number) => `/instances/${id}`,
};
