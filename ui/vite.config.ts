import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The bundle is committed (ui/dist) and embedded in the shoal binary; see
// docs/architecture.md ("The web UI bundle"). `npm run dev` proxies the API to a
// running `shoal standalone`.
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1024,
  },
  server: {
    proxy: { "/api": "http://127.0.0.1:12345" },
  },
});
