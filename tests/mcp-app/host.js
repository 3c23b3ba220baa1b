// The test host for memdir's MCP App: an MCP client (the official SDK) on the memdir server's
// MCP HTTP endpoint (/mcp, proxied by the test's page server so it is same-origin), and the
// official AppBridge rendering the server's ui:// resource in a sandbox proxy iframe on another
// origin (?sandbox=URL). The test drives it through window.mcpHost.
import {
  AppBridge,
  PostMessageTransport,
  RESOURCE_MIME_TYPE,
  getToolUiResourceUri,
} from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const HOST_INFO = { name: "memdir-test-host", version: "1.0.0" };
const params = new URLSearchParams(location.search);
const sandboxUrl = params.get("sandbox");
const statusEl = document.getElementById("status");
const apps = document.getElementById("apps");

const state = {
  ready: false,
  error: null,
  source: null, // "server": resources/read of the tool's ui:// resource
  resourceUri: null,
  resourceMeta: null,
  toolMeta: {}, // tool name -> its _meta
  viewCalls: [], // every tools/call the View made through the bridge: {name, arguments}
  sizes: [], // every ui/notifications/size-changed
  initialized: 0,
  appInfo: null,
};

let client;
let tools = [];
let resource = null;
let current = null; // { iframe, bridge }

async function loadResource(uri) {
  if (uri) {
    try {
      const r = await client.readResource({ uri });
      const c = r.contents.find((x) => x.uri === uri) || r.contents[0];
      if (c && c.mimeType === RESOURCE_MIME_TYPE && typeof c.text === "string") {
        return { html: c.text, meta: c._meta || null, source: "server", mimeType: c.mimeType };
      }
      if (c && c.mimeType === RESOURCE_MIME_TYPE && typeof c.blob === "string") {
        const bytes = Uint8Array.from(atob(c.blob), (ch) => ch.charCodeAt(0));
        return { html: new TextDecoder().decode(bytes), meta: c._meta || null, source: "server", mimeType: c.mimeType };
      }
      throw new Error(`resources/read ${uri}: no ${RESOURCE_MIME_TYPE} content`);
    } catch (e) {
      throw new Error(`the server names ${uri} but reading it failed: ${e.message}`);
    }
  }
  throw new Error("no tool names a ui:// resource in _meta.ui.resourceUri");
}

async function start() {
  client = new Client(HOST_INFO, {
    capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } },
  });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));
  tools = (await client.listTools()).tools;
  let uri = null;
  for (const t of tools) {
    state.toolMeta[t.name] = t._meta || null;
    const u = getToolUiResourceUri(t);
    if (u && !uri) uri = u;
  }
  resource = await loadResource(uri);
  state.resourceUri = uri;
  state.source = resource.source;
  state.resourceMeta = resource.meta;
  state.ready = true;
  statusEl.textContent = "ready";
}

// Calls a tool as the model would, then shows its View with the arguments and the result, as a
// host does for a tool whose _meta.ui names a resource. Resolves when the View has the result.
async function show(name, args) {
  const tool = tools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name}`);
  const result = await client.callTool({ name, arguments: args });
  if (current) {
    try {
      await current.bridge.teardownResource({});
    } catch (_) {}
    await current.bridge.close();
    current.iframe.remove();
    current = null;
  }
  const iframe = document.createElement("iframe");
  iframe.id = "app";
  iframe.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms");
  iframe.style.cssText = "width:900px;height:400px;border:1px solid #ccc";
  iframe.src = sandboxUrl;
  apps.appendChild(iframe);

  const bridge = new AppBridge(
    client,
    HOST_INFO,
    { serverTools: {}, serverResources: {}, logging: {} },
    {
      hostContext: {
        toolInfo: { tool },
        theme: "light",
        displayMode: "inline",
        availableDisplayModes: ["inline"],
        containerDimensions: { width: 900, maxHeight: 6000 },
        platform: "web",
        locale: "en-US",
      },
    },
  );
  const shown = new Promise((resolve, reject) => {
    bridge.onsandboxready = () => {
      const ui = (resource.meta && resource.meta.ui) || {};
      bridge.sendSandboxResourceReady({ html: resource.html, csp: ui.csp, permissions: ui.permissions });
    };
    bridge.oninitialized = async () => {
      try {
        state.initialized += 1;
        state.appInfo = bridge.getAppVersion ? bridge.getAppVersion() : null;
        await bridge.sendToolInput({ arguments: args });
        await bridge.sendToolResult(result);
        resolve(result);
      } catch (e) {
        reject(e);
      }
    };
  });
  bridge.onsizechange = ({ height }) => {
    state.sizes.push(height);
    if (height != null) iframe.style.height = `${height}px`;
  };
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  // connect() forwards tools/call to the server; log each one the View makes.
  const forward = bridge.oncalltool;
  bridge.oncalltool = async (p, extra) => {
    state.viewCalls.push({ name: p.name, arguments: p.arguments || {} });
    return forward(p, extra);
  };
  current = { iframe, bridge };
  return shown;
}

async function callTool(name, args) {
  return client.callTool({ name, arguments: args });
}

window.mcpHost = { state, show, callTool };
start().catch((e) => {
  state.error = String((e && e.stack) || e);
  statusEl.textContent = "error: " + state.error;
});
