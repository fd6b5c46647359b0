// flamino's molecular viewer (a Streamlit component without a build step): the scene built by
// flamino_core/structure/scene.py, drawn with 3Dmol.js. Streamlit's component protocol is a few
// postMessage calls: componentReady, then a "render" message with the arguments on every rerun.
"use strict";

const WATER = ["HOH", "WAT", "DOD", "H2O"];
const OTHER_CHAINS = "#d0d0d0";
let viewer = null;
let drawn = null; // the scene now drawn (its JSON), so a rerun with the same scene keeps the camera

function send(type, data) {
  window.parent.postMessage(Object.assign({ isStreamlitMessage: true, apiVersion: 1, type: type }, data || {}), "*");
}

function keyOf(atom) {
  return atom.chain + "|" + atom.resi + "|" + String(atom.icode || "").trim();
}

function say(text) {
  document.getElementById("status").textContent = text;
}

function showHover(text, event) {
  const box = document.getElementById("hover");
  box.textContent = text;
  box.style.display = "block";
  const stage = document.getElementById("stage").getBoundingClientRect();
  const x = event && event.clientX !== undefined ? event.clientX - stage.left : 10;
  const y = event && event.clientY !== undefined ? event.clientY - stage.top : 10;
  box.style.left = Math.min(x + 14, stage.width - 260) + "px";
  box.style.top = Math.max(y - 34, 4) + "px";
  say(text);
}

function hideHover() {
  document.getElementById("hover").style.display = "none";
}

function legend(scene) {
  const box = document.getElementById("legend");
  const l = scene.legend;
  const fmt = (v) => (Math.abs(v) >= 100 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(1) : v.toFixed(2));
  box.innerHTML = "";
  if (l.keys) return categories(box, l); // a predicted complex: by chain or pLDDT band
  const title = document.createElement("div");
  title.textContent = l.label + (l.signed ? " (white: 0)" : "");
  if (l.bands && l.bands.length) {
    // Fixed bands (pLDDT's): one swatch per band with its name, never a gradient over the data.
    box.append(title);
    for (const band of l.bands) {
      const row = document.createElement("div");
      row.className = "band";
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = band.colour;
      row.append(swatch, document.createTextNode(band.name));
      box.append(row);
    }
    keysOf(scene);
    return;
  }
  const bar = document.createElement("div");
  bar.className = "bar";
  bar.style.background = "linear-gradient(to right, " + l.stops.join(", ") + ")";
  const ends = document.createElement("div");
  ends.className = "ends";
  ends.innerHTML = "<span></span><span></span>";
  ends.children[0].textContent = fmt(l.low);
  ends.children[1].textContent = fmt(l.high);
  const none = document.createElement("div");
  none.textContent = "grey: no value (not aligned)";
  box.append(title, bar, ends, none);
  keysOf(scene);
}

function keysOf(scene) {
  const keys = document.getElementById("keys");
  keys.innerHTML = "";
  const rows = [];
  if (scene.contacts.length) {
    const yes = scene.contacts.filter((c) => c.contact).length;
    rows.push(["#009E73", "top predicted pair, a contact (" + yes + ")"]);
    rows.push(["#D55E00", "top predicted pair, no contact (" + (scene.contacts.length - yes) + ")"]);
  }
  if (scene.chosen) rows.push(["#FF00FF", "chosen residue (sticks)"]);
  for (const [colour, text] of rows) {
    const row = document.createElement("div");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colour;
    row.append(swatch, document.createTextNode(text));
    keys.append(row);
  }
  keys.style.display = rows.length ? "block" : "none";
}

function categories(box, l) {
  // Named colours (chains, AlphaFold's pLDDT bands) instead of a colour bar; no contact keys.
  const title = document.createElement("div");
  title.textContent = l.label;
  box.append(title);
  for (const [colour, text] of l.keys) {
    const row = document.createElement("div");
    const swatch = document.createElement("span");
    swatch.style.cssText = "display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle";
    swatch.style.background = colour;
    row.append(swatch, document.createTextNode(text));
    box.append(row);
  }
  document.getElementById("keys").style.display = "none";
}

function draw(scene, height) {
  const stage = document.getElementById("stage");
  stage.style.height = height + "px";
  const json = JSON.stringify(scene);
  if (viewer !== null && json === drawn) return;
  const keepView = viewer !== null && drawn !== null && JSON.parse(drawn).model === scene.model;
  const view = keepView ? viewer.getView() : null;
  if (viewer === null) {
    viewer = $3Dmol.createViewer(stage, { backgroundColor: "white", antialias: true });
  }
  viewer.clear();
  const model = viewer.addModel(scene.model, scene.format);
  const byKey = new Map(scene.residues.map((r) => [r.key, r]));
  const colourOf = (atom) => (byKey.has(keyOf(atom)) ? byKey.get(keyOf(atom)).colour : OTHER_CHAINS);
  const isChain = { chain: scene.chains || scene.chain }; // a complex colours every chain

  viewer.setStyle({}, {});
  // Other chains (protein or nucleic acid) in grey cartoon, the chosen chain coloured by the track.
  viewer.setStyle({ not: isChain, hetflag: false }, { cartoon: { color: OTHER_CHAINS } });
  viewer.setStyle(isChain, { cartoon: { colorfunc: colourOf } });
  // Ligands and ions as sticks / spheres (water stays hidden).
  viewer.setStyle({ hetflag: true, not: { resn: WATER } }, { stick: { radius: 0.2, colorscheme: "default" } });
  if (scene.chosen) {
    const chosen = scene.chosen.key;
    viewer.addStyle({ predicate: (a) => keyOf(a) === chosen }, { stick: { radius: 0.3, color: "#FF00FF" } });
  }
  for (const pair of scene.contacts) {
    viewer.addCylinder({
      start: { x: pair.start[0], y: pair.start[1], z: pair.start[2] },
      end: { x: pair.end[0], y: pair.end[1], z: pair.end[2] },
      radius: 0.18, color: pair.colour, dashed: !pair.contact, fromCap: 1, toCap: 1, hoverable: true,
      hover_callback: (shape, v, event) => showHover(pair.text, event),
      unhover_callback: hideHover,
    });
  }
  viewer.setHoverable({}, true, (atom, v, event) => {
    const residue = byKey.get(keyOf(atom));
    showHover(residue ? residue.text : atom.chain + " " + atom.resi + " " + atom.resn + " (not in the compared chain)", event);
  }, hideHover);
  viewer.setHoverDuration(80);
  if (view) {
    viewer.setView(view);
  } else {
    viewer.zoomTo(isChain);
    viewer.zoom(1.1); // zoomTo leaves a wide margin around the chain
  }
  viewer.render();
  legend(scene);
  drawn = json;
  // For tests and the curious: what the viewer was handed, read back from its own model.
  window.flamino = {
    viewer: viewer,
    scene: scene,
    atomsOf: (chain, resi) => model.selectedAtoms({ chain: chain, resi: resi }),
    colourOf: (chain, resi, icode) => byKey.has(chain + "|" + resi + "|" + (icode || "")) ? byKey.get(chain + "|" + resi + "|" + (icode || "")).colour : null,
    drawnColour: (chain, resi) => {
      const atoms = model.selectedAtoms({ chain: chain, resi: resi, atom: "CA" });
      return atoms.length ? colourOf(atoms[0]) : null;
    },
  };
  document.body.dataset.drawn = String(scene.residues.length);
}

function render(args) {
  const height = args.height || 560;
  try {
    if (typeof $3Dmol === "undefined") throw new Error("3Dmol.js did not load");
    draw(args.scene, height);
  } catch (err) {
    const problem = document.getElementById("problem");
    problem.style.display = "block";
    problem.textContent = "The molecular viewer could not draw this structure (" + err.message + "). " +
      "Your browser may have WebGL turned off.";
    document.body.dataset.drawn = "error";
  }
  send("streamlit:setFrameHeight", { height: document.getElementById("frame").offsetHeight + 4 });
}

window.addEventListener("message", (event) => {
  if (event.data && event.data.type === "streamlit:render") render(event.data.args);
});
send("streamlit:componentReady", { apiVersion: 1 });
