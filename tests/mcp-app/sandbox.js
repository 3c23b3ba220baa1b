// The sandbox proxy of the test host (spec 2026-01-26, "Sandbox proxy"): served from an origin
// other than the host's, it loads the View's HTML into an inner iframe under the CSP the
// resource declares (the spec's restrictive default when it declares none), and relays every
// message between host and View except the ui/notifications/sandbox-* ones it handles itself.
"use strict";
(() => {
  const inner = document.createElement("iframe");
  inner.style.cssText = "border:0;width:100%;height:100%;display:block";
  const list = (xs) => (Array.isArray(xs) ? xs.filter((x) => /^[a-z]+:\/\/[^\s;,']+$/i.test(x)).join(" ") : "");

  function csp(c) {
    c = c || {};
    const res = list(c.resourceDomains);
    return [
      "default-src 'none'",
      `script-src 'self' 'unsafe-inline' ${res}`,
      `style-src 'self' 'unsafe-inline' ${res}`,
      `connect-src 'self' ${list(c.connectDomains)}`,
      `img-src 'self' data: ${res}`,
      `font-src 'self' ${res}`,
      `media-src 'self' data: ${res}`,
      `frame-src ${list(c.frameDomains) || "'none'"}`,
      "object-src 'none'",
      `base-uri ${list(c.baseUriDomains) || "'self'"}`,
    ].join("; ");
  }

  function load(params) {
    const meta = `<meta http-equiv="Content-Security-Policy" content="${csp(params.csp).replace(/"/g, "&quot;")}">`;
    let html = String(params.html || "");
    html = /<head[^>]*>/i.test(html) ? html.replace(/<head[^>]*>/i, (m) => m + meta) : meta + html;
    inner.setAttribute("sandbox", typeof params.sandbox === "string" ? params.sandbox : "allow-scripts allow-forms");
    inner.srcdoc = html;
    if (!inner.isConnected) document.body.appendChild(inner);
    window.sandboxCsp = csp(params.csp);
  }

  window.addEventListener("message", (e) => {
    const m = e.data;
    if (e.source === window.parent) {
      if (m && typeof m.method === "string" && m.method.startsWith("ui/notifications/sandbox-")) {
        if (m.method === "ui/notifications/sandbox-resource-ready") load(m.params || {});
        return;
      }
      if (inner.contentWindow) inner.contentWindow.postMessage(m, "*");
    } else if (inner.contentWindow && e.source === inner.contentWindow) {
      window.parent.postMessage(m, "*");
    }
  });
  window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} }, "*");
})();
