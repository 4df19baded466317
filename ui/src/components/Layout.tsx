import { useSyncExternalStore, type ReactNode } from "react";
import { connection } from "../api/client";
import { Link, path, useLocation } from "../router";
import { currentProject } from "../project";

function useConnection() {
  const lost = useSyncExternalStore(connection.subscribe, () => connection.lost);
  return { lost };
}

/** Says so when the server stops answering; the client keeps retrying meanwhile. */
function ConnectionBanner() {
  const { lost } = useConnection();
  if (!lost) return null;
  return (
    <div className="banner" role="alert">
      Connection lost: the shoal server does not answer. Retrying…
    </div>
  );
}

export function Layout({ children }: { children: ReactNode }) {
  const { path: here } = useLocation();
  const nav = [
    { href: path.workflows(currentProject()), label: "Workflows", active: here.startsWith("/projects") },
    { href: "/instances", label: "Instances", active: here.startsWith("/instances") },
    { href: "/cluster", label: "Cluster", active: here.startsWith("/cluster") },
  ];
  return (
    <>
      <header className="topbar">
        <Link href="/" className="brand">
          shoal
        </Link>
        <nav aria-label="Main">
          {nav.map((n) => (
            <Link key={n.label} href={n.href} aria-current={n.active ? "page" : undefined}>
              {n.label}
            </Link>
          ))}
          <a href="/api/docs" target="_blank" rel="noreferrer">
            API docs
          </a>
        </nav>
      </header>
      <ConnectionBanner />
      <main>{children}</main>
    </>
  );
}
