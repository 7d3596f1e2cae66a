// A person watching a job's dashboard, for bench/dashboard_bench.sh: headless
// Chromium (puppeteer-core from web/node_modules) with the page open; the page
// polls the master's API every second and redraws.
//
//   node dashboard_watch.js JOB_DIR watch [SCREENSHOT]
//       starts the browser and prints "ready", then opens the job's dashboard
//       once its master serves it (JOB_DIR/dashboard.url) and keeps it open
//       until killed (SIGTERM); with SCREENSHOT, saves one once the job is
//       half done
//   node dashboard_watch.js URL ended SCREENSHOT
//       waits until the page shows the job finished, saves a screenshot, exits
"use strict";
const fs = require("fs");
const path = require("path");
const puppeteer = require("puppeteer-core");

const TIMEOUT = 120000;

// The dashboard's URL with the token, once the master has written it.
async function dashboardOf(jobDir) {
  for (;;) {
    try {
      const base = fs.readFileSync(path.join(jobDir, "dashboard.url"), "utf8").trim();
      const token = fs.readFileSync(path.join(jobDir, "token"), "utf8").trim();
      if (base && token) return `${base}/?token=${token}`;
    } catch (err) {
      if (err.code !== "ENOENT") throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function main() {
  const [target, mode, screenshot] = process.argv.slice(2);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
      "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
  const close = () => browser.close().then(() => process.exit(0), () => process.exit(0));
  process.on("SIGTERM", close);
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1100 });
  let url = target;
  if (mode === "watch") {
    console.log("ready");
    url = await dashboardOf(target);
  }
  const response = await page.goto(url, { waitUntil: "load" });
  if (response.status() !== 200) throw new Error(`${url}: HTTP ${response.status()}`);
  if (mode === "ended") {
    await page.waitForFunction(() => document.querySelector("#state").textContent === "finished",
      { timeout: TIMEOUT });
    await page.waitForFunction(() => Number(document.querySelector("#loss-chart").dataset.points) > 0,
      { timeout: TIMEOUT });
    await page.screenshot({ path: screenshot, fullPage: true });
    await browser.close();
    return;
  }
  if (screenshot) {
    // Half of the records done: "a / b" in the records card.
    await page.waitForFunction(() => {
      const [done, total] = document.querySelector("#records").textContent.replace(/,/g, "")
        .split("/").map(Number);
      return total > 0 && done >= total / 2;
    }, { timeout: TIMEOUT, polling: 500 });
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(`screenshot ${screenshot}`);
  }
  await new Promise(() => {});  // until SIGTERM
}

main().catch((err) => {
  console.log(`error ${err.message}`);
  process.exit(1);
});
