#include "ckptplan/emit/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "ckptplan/emit/copy_lanes.h"
#include "ckptplan/emit/plan_io.h"
#include "ckptplan/ir/cost.h"
#include "ckptplan/emit/report.h"
#include "ckptplan/base/size.h"

namespace ckptplan {
namespace {

// Okabe-Ito palette (colour-blind safe), plus grey for the reserve; indexed
// by Category.
constexpr const char* kCategoryColors[kNumCategories] = {
    "#0072B2",  // parameters: blue
    "#56B4E9",  // gradients: sky blue
    "#009E73",  // optimizer state: bluish green
    "#F0E442",  // buffers: yellow
    "#CC79A7",  // inputs: reddish purple
    "#E69F00",  // saved activations: orange
    "#D55E00",  // temporaries: vermillion
    "#000000",  // recomputed: black
    "#999999",  // reserve: grey
};

// Chart geometry in CSS pixels.
constexpr int kChartWidth = 960;
constexpr int kChartHeight = 300;
constexpr int kPlotLeft = 80;
constexpr int kPlotTop = 24;
constexpr int kPlotWidth = 860;
constexpr int kPlotHeight = 236;
// At most one bucket per horizontal pixel.
constexpr size_t kMaxBuckets = kPlotWidth;
// Rows shown in the decisions table before it is cut (the plan file has all).
constexpr size_t kMaxDecisionRows = 1000;
// Chain nodes shown per decision before "+N more".
constexpr size_t kMaxChainShown = 12;

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string CategoryName(size_t c) { return std::string(ToString(static_cast<Category>(c))); }

// Phase a step is drawn in: recompute steps run inside the backward.
Phase StepPhase(const Graph& graph, const SimResult& sim, uint32_t s) {
  return sim.steps[s].recompute ? Phase::kBackward : graph.nodes[sim.steps[s].node].phase;
}

// A "nice" axis: ticks at multiples of `step` from 0 to `max` (inclusive),
// each labelled by `label(value)`.
struct Axis {
  double max = 1;
  double step = 1;
};

// Picks 1, 2, 2.5 or 5 x 10^k as tick step so `top` needs about 5 ticks.
Axis NiceAxis(double top) {
  if (!(top > 0)) top = 1;
  double raw = top / 5;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (double factor : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (factor * magnitude >= raw) {
      step = factor * magnitude;
      break;
    }
  }
  return {std::ceil(top / step - 1e-9) * step, step};
}

// IEC unit for a byte axis reaching `bytes`: 1024^k and its name.
std::pair<double, const char*> ByteUnit(double bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  double scale = 1;
  while (bytes / scale >= 1024.0 && unit < 6) {
    scale *= 1024.0;
    ++unit;
  }
  return {scale, kNames[unit]};
}

std::string Number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

std::string PercentOf(int64_t part, int64_t whole) {
  return whole > 0 ? Fixed(Percent(static_cast<double>(part), static_cast<double>(whole)), 1) + "%"
                   : "-";
}

std::string BytesCell(int64_t bytes) {
  return "<td class=\"num\" data-bytes=\"" + std::to_string(bytes) + "\" title=\"" +
         std::to_string(bytes) + " bytes\">" + FormatBytes(bytes) + "</td>";
}

void RequireCategories(const SimResult& sim) {
  if (sim.by_category.size() != sim.steps.size()) {
    throw std::logic_error("html report needs a simulation with record_categories");
  }
}

// Stacked step-area path of categories [0, c] over buckets, in a coordinate
// system where x is the step index and y is pixels down from the plot top.
std::string SeriesPath(const SimResult& sim, const Downsampled& buckets, size_t c,
                       double bytes_per_pixel) {
  size_t count = buckets.step.size();
  uint32_t steps = static_cast<uint32_t>(sim.steps.size());
  auto y_of = [&](size_t b, size_t through) {
    int64_t sum = 0;
    for (size_t k = 0; k < through; ++k) sum += sim.by_category[buckets.step[b]][k];
    return Fixed(kPlotHeight - static_cast<double>(sum) / bytes_per_pixel, 1);
  };
  auto x_end = [&](size_t b) {
    return std::to_string(b + 1 < count ? buckets.first_step[b + 1] : steps);
  };
  std::string d = "M0," + y_of(0, c + 1);
  for (size_t b = 0; b < count; ++b) {
    d += "H" + x_end(b);
    if (b + 1 < count) d += "V" + y_of(b + 1, c + 1);
  }
  d += "V" + y_of(count - 1, c);
  for (size_t b = count; b-- > 0;) {
    d += "H" + std::to_string(buckets.first_step[b]);
    if (b > 0) d += "V" + y_of(b - 1, c);
  }
  return d + "Z";
}

std::string PhaseBands(const Graph& graph, const SimResult& sim) {
  std::string out;
  uint32_t steps = static_cast<uint32_t>(sim.steps.size());
  for (uint32_t begin = 0; begin < steps;) {
    Phase phase = StepPhase(graph, sim, begin);
    uint32_t end = begin + 1;
    while (end < steps && StepPhase(graph, sim, end) == phase) ++end;
    double x0 = kPlotLeft + static_cast<double>(begin) * kPlotWidth / steps;
    double width = static_cast<double>(end - begin) * kPlotWidth / steps;
    std::string name(ToString(phase));
    out += "<rect class=\"phase phase-" + name + "\" x=\"" + Fixed(x0, 1) + "\" y=\"" +
           std::to_string(kPlotTop) + "\" width=\"" + Fixed(width, 1) + "\" height=\"" +
           std::to_string(kPlotHeight) + "\"><title>" + name + ": steps " + std::to_string(begin) +
           "-" + std::to_string(end - 1) + "</title></rect>";
    if (width >= 40) {
      out += "<text class=\"phase-label\" x=\"" + Fixed(x0 + 4, 1) + "\" y=\"" +
             std::to_string(kPlotTop - 6) + "\">" + name + "</text>";
    }
    begin = end;
  }
  return out;
}

std::string YAxis(const Axis& axis, double unit, const char* unit_name) {
  std::string out;
  for (double value = 0; value <= axis.max + axis.step / 2; value += axis.step) {
    double y = kPlotTop + kPlotHeight - value / axis.max * kPlotHeight;
    out += "<line class=\"grid\" x1=\"" + std::to_string(kPlotLeft) + "\" x2=\"" +
           std::to_string(kPlotLeft + kPlotWidth) + "\" y1=\"" + Fixed(y, 1) + "\" y2=\"" +
           Fixed(y, 1) + "\"/><text class=\"tick\" x=\"" + std::to_string(kPlotLeft - 6) +
           "\" y=\"" + Fixed(y + 4, 1) + "\" text-anchor=\"end\">" + Number(value / unit) + " " +
           unit_name + "</text>";
  }
  return out;
}

std::string XAxis(uint32_t steps) {
  std::string out;
  int base = kPlotTop + kPlotHeight;
  for (int i = 0; i <= 4; ++i) {
    uint32_t step = static_cast<uint32_t>(static_cast<uint64_t>(steps - 1) * i / 4);
    double x = kPlotLeft + (step + 0.5) * kPlotWidth / steps;
    out += "<text class=\"tick\" x=\"" + Fixed(x, 1) + "\" y=\"" + std::to_string(base + 16) +
           "\" text-anchor=\"middle\">" + std::to_string(step) + "</text>";
  }
  out += "<text class=\"axis-title\" x=\"" + std::to_string(kPlotLeft + kPlotWidth / 2) +
         "\" y=\"" + std::to_string(base + 34) + "\" text-anchor=\"middle\">step (" +
         std::to_string(steps) + " steps)</text>";
  return out;
}

// One stacked area chart of `sim`; `byte_axis_max` is shared by every chart
// of the page so they compare at a glance.
std::string MemoryChart(const Graph& graph, const SimResult& sim, const std::string& id,
                        const std::string& title, double byte_axis_max, int64_t budget) {
  uint32_t steps = static_cast<uint32_t>(sim.steps.size());
  Downsampled buckets = DownsampleByMax(sim, kMaxBuckets);
  int64_t drawn_max = 0;
  for (uint32_t s : buckets.step) drawn_max = std::max(drawn_max, sim.total[s]);
  auto [unit, unit_name] = ByteUnit(byte_axis_max);
  // 5% headroom keeps the budget and peak labels inside the plot.
  Axis axis = NiceAxis(byte_axis_max * 1.05 / unit);
  axis.max *= unit;
  axis.step *= unit;
  double bytes_per_pixel = axis.max / kPlotHeight;

  std::string out = "<figure><figcaption>" + Escape(title) + "</figcaption>";
  out += "<svg class=\"chart\" id=\"" + id + "\" width=\"" + std::to_string(kChartWidth) +
         "\" height=\"" + std::to_string(kChartHeight) + "\" viewBox=\"0 0 " +
         std::to_string(kChartWidth) + " " + std::to_string(kChartHeight) +
         "\" role=\"img\" aria-label=\"" + Escape(title) + "\" data-peak-bytes=\"" +
         std::to_string(sim.peak_bytes) + "\" data-drawn-max-bytes=\"" + std::to_string(drawn_max) +
         "\" data-steps=\"" + std::to_string(steps) + "\" data-buckets=\"" +
         std::to_string(buckets.step.size()) + "\">";
  out += PhaseBands(graph, sim) + YAxis(axis, unit, unit_name) + XAxis(steps);
  out += "<svg x=\"" + std::to_string(kPlotLeft) + "\" y=\"" + std::to_string(kPlotTop) +
         "\" width=\"" + std::to_string(kPlotWidth) + "\" height=\"" + std::to_string(kPlotHeight) +
         "\" viewBox=\"0 0 " + std::to_string(steps) + " " + std::to_string(kPlotHeight) +
         "\" preserveAspectRatio=\"none\">";
  for (size_t c = 0; c < kNumCategories; ++c) {
    out += "<path class=\"series\" data-category=\"" + CategoryName(c) + "\" fill=\"" +
           kCategoryColors[c] + "\" d=\"" + SeriesPath(sim, buckets, c, bytes_per_pixel) +
           "\"><title>" + CategoryName(c) + "</title></path>";
  }
  out += "</svg>";
  if (budget >= 0) {
    double y = kPlotTop + kPlotHeight - static_cast<double>(budget) / bytes_per_pixel;
    out += "<line class=\"budget\" x1=\"" + std::to_string(kPlotLeft) + "\" x2=\"" +
           std::to_string(kPlotLeft + kPlotWidth) + "\" y1=\"" + Fixed(y, 1) + "\" y2=\"" +
           Fixed(y, 1) + "\"/><text class=\"budget-label\" x=\"" + std::to_string(kPlotLeft + 4) +
           "\" y=\"" + Fixed(y - 4, 1) + "\">budget " + FormatBytes(budget) + "</text>";
  }
  double peak_x = kPlotLeft + (sim.peak_step + 0.5) * kPlotWidth / steps;
  double peak_y = kPlotTop + kPlotHeight - static_cast<double>(sim.peak_bytes) / bytes_per_pixel;
  const Node& peak_node = graph.nodes[sim.steps[sim.peak_step].node];
  bool label_left = peak_x > kPlotLeft + kPlotWidth * 0.6;
  out += "<circle class=\"peak-marker\" cx=\"" + Fixed(peak_x, 1) + "\" cy=\"" + Fixed(peak_y, 1) +
         "\" r=\"4\"/><text class=\"peak-label\" x=\"" + Fixed(peak_x + (label_left ? -8 : 8), 1) +
         "\" y=\"" + Fixed(std::max(peak_y - 8, kPlotTop + 12.0), 1) + "\" text-anchor=\"" +
         (label_left ? "end" : "start") + "\">peak " + FormatBytes(sim.peak_bytes) + " at step " +
         std::to_string(sim.peak_step) + " (" + Escape(peak_node.name) + ")</text>";
  return out + "</svg></figure>";
}

// Height of one copy lane, CSS pixels.
constexpr int kLaneHeight = 18;

// The copy engines' lanes under a chart of `sim`, on its step axis.
std::string CopyLanes(const Graph& graph, const SimResult& sim, const OffloadedGraph& offloaded) {
  const std::vector<CopySlice> slices = CopySlices(sim, offloaded);
  const double steps = static_cast<double>(sim.steps.size());
  const int height = 2 * kLaneHeight + 8;
  std::string out = "<svg class=\"copy-lanes\" id=\"copy-lanes\" width=\"" +
                    std::to_string(kChartWidth) + "\" height=\"" + std::to_string(height) +
                    "\" viewBox=\"0 0 " + std::to_string(kChartWidth) + " " +
                    std::to_string(height) + "\" role=\"img\" aria-label=\"copies to host and "
                    "back, by step\" data-copies=\"" + std::to_string(slices.size()) + "\">";
  for (int lane = 0; lane < 2; ++lane) {
    const int y = 4 + lane * kLaneHeight;
    out += "<text class=\"tick\" x=\"" + std::to_string(kPlotLeft - 6) + "\" y=\"" +
           std::to_string(y + 13) + "\" text-anchor=\"end\">" +
           (lane == 0 ? "to host" : "to device") + "</text><rect class=\"lane\" x=\"" +
           std::to_string(kPlotLeft) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
           std::to_string(kPlotWidth) + "\" height=\"" + std::to_string(kLaneHeight - 2) +
           "\" fill=\"#f3f3f3\"/>";
  }
  for (const CopySlice& slice : slices) {
    const int y = 4 + (slice.to_host ? 0 : kLaneHeight);
    const double x0 = kPlotLeft + slice.begin_step * kPlotWidth / steps;
    // At least one pixel wide, so a short copy still shows.
    const double width = std::max(1.0, (slice.end_step - slice.begin_step) * kPlotWidth / steps);
    // Colours inline: the page's style sheet stays as it is without offload.
    out += "<rect class=\"copy " + std::string(slice.to_host ? "copy-out" : "copy-in") +
           "\" fill=\"" + (slice.to_host ? "#0072B2" : "#009E73") + "\" x=\"" + Fixed(x0, 1) +
           "\" y=\"" + std::to_string(y) + "\" width=\"" + Fixed(width, 1) + "\" height=\"" + std::to_string(kLaneHeight - 2) +
           "\" data-bytes=\"" + std::to_string(slice.bytes) + "\"><title>" +
           Escape(graph.tensors[slice.tensor].name) + ": " + FormatBytes(slice.bytes) +
           (slice.to_host ? " to host, " : " to device, ") + Number(slice.start_us) + "-" +
           Number(slice.end_us) + " us</title></rect>";
  }
  return out + "</svg>";
}

std::string OffloadTable(const Graph& graph, const OffloadedGraph& offloaded) {
  std::string out = "<p>" + std::to_string(offloaded.copies.size()) +
                    " tensors offloaded to host: exposed copy time " +
                    Number(offloaded.exposed_us) + " us, host peak " +
                    FormatBytes(offloaded.host_peak_bytes) + ".</p>";
  out +=
      "<table id=\"offloads\"><thead><tr><th>tensor</th><th>bytes</th><th>host bytes</th>"
      "<th>freed after</th><th>reloaded before</th><th>copy out (us)</th>"
      "<th>copy back (us)</th></tr></thead><tbody>";
  for (const OffloadCopy& copy : offloaded.copies) {
    const std::string& freed = graph.nodes[offloaded.rewritten_node[copy.freed_after]].name;
    const std::string& back = graph.nodes[offloaded.rewritten_node[copy.reloaded_before]].name;
    out += "<tr><td>" + Escape(graph.tensors[copy.tensor].name) + "</td>" +
           BytesCell(copy.bytes) + BytesCell(copy.host_bytes) + "<td>" + Escape(freed) +
           "</td><td>" + Escape(back) + "</td><td class=\"num\">" + Number(copy.out_start_us) +
           "-" + Number(copy.out_end_us) + "</td><td class=\"num\">" +
           Number(copy.in_start_us) + "-" + Number(copy.in_end_us) + "</td></tr>";
  }
  return out + "</tbody></table>";
}

std::string Legend(bool has_budget) {
  std::string out = "<ul class=\"legend\">";
  for (size_t c = 0; c < kNumCategories; ++c) {
    out += "<li><span class=\"swatch\" style=\"background:" + std::string(kCategoryColors[c]) +
           "\"></span>" + CategoryName(c) + "</li>";
  }
  if (has_budget) out += "<li><span class=\"swatch budget-swatch\"></span>budget</li>";
  out += "<li><span class=\"swatch phase-swatch-forward\"></span>forward</li>";
  out += "<li><span class=\"swatch phase-swatch-backward\"></span>backward (with recompute)</li>";
  out += "<li><span class=\"swatch phase-swatch-optimizer\"></span>optimizer</li>";
  return out + "</ul>";
}

std::string KeyFigures(const Graph& graph, const HtmlReportInput& input) {
  const SimResult& planned = *input.planned;
  const SimResult& save_all = *input.save_all;
  auto row = [](const std::string& name, const std::string& cell) {
    return "<tr><th>" + name + "</th>" + cell + "</tr>";
  };
  std::string out = "<table class=\"figures\">";
  if (input.budget_bytes >= 0) out += row("budget", BytesCell(input.budget_bytes));
  if (input.reserve_bytes > 0) out += row("reserve", BytesCell(input.reserve_bytes));
  const Node& node = graph.nodes[planned.steps[planned.peak_step].node];
  out += "<tr><th>peak, " + std::string(&planned == &save_all ? "simulated" : "planned") +
         "</th><td class=\"num\" id=\"planned-peak\" data-bytes=\"" +
         std::to_string(planned.peak_bytes) + "\">" + FormatBytes(planned.peak_bytes) +
         "</td><td>at step " + std::to_string(planned.peak_step) + ", node " + Escape(node.name) +
         " (" +
         (planned.steps[planned.peak_step].recompute ? std::string("recompute, in the backward")
                                                     : std::string(ToString(node.phase))) +
         ")</td></tr>";
  if (&planned != &save_all) {
    out += "<tr><th>peak, save-all</th><td class=\"num\" id=\"save-all-peak\" data-bytes=\"" +
           std::to_string(save_all.peak_bytes) + "\">" + FormatBytes(save_all.peak_bytes) +
           "</td><td>the plan saves " + FormatBytes(save_all.peak_bytes - planned.peak_bytes) +
           " (" + PercentOf(save_all.peak_bytes - planned.peak_bytes, save_all.peak_bytes) +
           ")</td></tr>";
  }
  const ApproxPlan* approx = input.approx != nullptr && input.approx->any() ? input.approx : nullptr;
  const double cost = approx ? approx->recompute_cost : planned.recompute_cost;
  const std::string overhead = Fixed(Percent(cost, planned.step_cost), 2);
  out += row("recompute cost", "<td class=\"num\">" + CostText(graph.cost_unit, cost) +
                                   "</td><td>" + overhead + "% of the step's " +
                                   CostText(graph.cost_unit, planned.step_cost) +
                                   (approx ? ", with approximate recompute" : "") + "</td>");
  if (approx) {
    out += row("exact recompute",
               "<td class=\"num\">" + CostText(graph.cost_unit, approx->exact_recompute_cost) +
                   "</td><td>" + std::to_string(approx->choices.size()) +
                   " linear(s) re-run approximately, estimated gradient error " +
                   ErrorText(approx->estimated_error) + " &lt;= " + ErrorText(approx->max_error) +
                   "</td>");
  }
  return out + "</table>";
}

std::string BreakdownTable(const HtmlReportInput& input) {
  const SimResult& planned = *input.planned;
  const SimResult& save_all = *input.save_all;
  bool both = &planned != &save_all;
  std::string out =
      "<table class=\"breakdown\" id=\"peak-breakdown\"><thead><tr><th>category</th>"
      "<th>at the peak</th><th>share</th>";
  if (both) out += "<th>save-all, at its peak</th><th>share</th>";
  out += "</tr></thead><tbody>";
  for (size_t c = 0; c < kNumCategories; ++c) {
    int64_t bytes = CategoriesAt(planned, planned.peak_step)[c];
    int64_t all_bytes = CategoriesAt(save_all, save_all.peak_step)[c];
    out += "<tr><td><span class=\"swatch\" style=\"background:" + std::string(kCategoryColors[c]) +
           "\"></span>" + CategoryName(c) + "</td>" + BytesCell(bytes) + "<td class=\"num\">" +
           PercentOf(bytes, planned.peak_bytes) + "</td>";
    if (both) {
      out += BytesCell(all_bytes) + "<td class=\"num\">" +
             PercentOf(all_bytes, save_all.peak_bytes) + "</td>";
    }
    out += "</tr>";
  }
  out += "<tr class=\"total\"><th>total</th>" + BytesCell(planned.peak_bytes) + "<td></td>";
  if (both) out += BytesCell(save_all.peak_bytes) + "<td></td>";
  return out + "</tr></tbody></table>";
}

std::string TopTensorsTable(const Graph& graph, const HtmlReportInput& input) {
  const SimResult& planned = *input.planned;
  std::string out =
      "<table id=\"top-tensors\"><thead><tr><th>tensor</th><th>bytes</th>"
      "<th>category</th><th>made by</th><th>op</th><th>module scope</th></tr>"
      "</thead><tbody>";
  for (const LiveTensor& live : LiveAt(graph, planned, planned.peak_step, input.top)) {
    const Tensor& tensor = graph.tensors[live.tensor];
    const Node* producer = tensor.producer == kNoId ? nullptr : &graph.nodes[tensor.producer];
    out += "<tr><td>" + Escape(tensor.name) + "</td>" + BytesCell(live.bytes) + "<td>" +
           CategoryName(static_cast<size_t>(live.category)) + "</td><td>" +
           (producer ? Escape(producer->name) : "-") + "</td><td>" +
           (producer ? Escape(producer->op) : "-") + "</td><td>" +
           (producer && !producer->scope.empty() ? Escape(producer->scope) : "-") + "</td></tr>";
  }
  return out + "</tbody></table>";
}

std::string ChainText(const Graph& graph, const std::vector<NodeId>& chain) {
  std::string text;
  for (size_t i = 0; i < chain.size() && i < kMaxChainShown; ++i) {
    text += (i ? " &rarr; " : "") + Escape(graph.nodes[chain[i]].name);
  }
  if (chain.size() > kMaxChainShown) {
    text += " &hellip; +" + std::to_string(chain.size() - kMaxChainShown) + " more";
  }
  return text;
}

std::string DecisionsTable(const Graph& graph, const HtmlReportInput& input) {
  std::vector<Decision> decisions = MakeDecisions(graph, *input.keep, *input.planned, input.approx);
  size_t recomputed = std::count_if(decisions.begin(), decisions.end(),
                                    [](const Decision& d) { return d.recompute; });
  std::string out = "<p>" + std::to_string(recomputed) + " of " + std::to_string(decisions.size()) +
                    " candidate tensors recomputed; the others are saved for the backward.</p>";
  if (recomputed == 0) return out;
  out +=
      "<table id=\"decisions\"><thead><tr><th>tensor</th><th>bytes</th>"
      "<th>recompute cost</th><th>chain re-run</th></tr></thead><tbody>";
  size_t shown = 0;
  for (const Decision& decision : decisions) {
    if (!decision.recompute) continue;
    if (shown++ == kMaxDecisionRows) break;
    out += "<tr><td>" + Escape(graph.tensors[decision.tensor].name) + "</td>" +
           BytesCell(decision.bytes) + "<td class=\"num\">" +
           CostText(graph.cost_unit, decision.recompute_cost) + "</td><td>" +
           ChainText(graph, decision.chain) + (decision.approximate ? " (approximate)" : "") +
           "</td></tr>";
  }
  out += "</tbody></table>";
  if (recomputed > kMaxDecisionRows) {
    out += "<p>&hellip; and " + std::to_string(recomputed - kMaxDecisionRows) +
           " more (the plan file lists every decision).</p>";
  }
  return out;
}

constexpr const char* kStyle = R"(<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555;margin:0 0 12px}
table{border-collapse:collapse;font-size:13px;margin:4px 0}
th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.total th,tr.total td{border-top:2px solid #999;font-weight:bold}
figure{margin:8px 0}figcaption{font-weight:bold;font-size:14px;margin-bottom:2px}
.legend{list-style:none;padding:0;margin:6px 0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:13px}
.swatch{display:inline-block;width:12px;height:12px;margin-right:5px;vertical-align:-1px;border:1px solid #0003}
.budget-swatch{height:0;border:0;border-top:2px dashed #D55E00;vertical-align:3px}
.phase-swatch-forward,.phase-forward{background:#f3f3f3;fill:#f3f3f3}
.phase-swatch-backward,.phase-backward{background:#e3e3e3;fill:#e3e3e3}
.phase-swatch-optimizer,.phase-optimizer{background:#d0d0d0;fill:#d0d0d0}
.phase-label{font-size:11px;fill:#666}
.grid{stroke:#0000001a}.tick{font-size:11px;fill:#444}.axis-title{font-size:12px;fill:#444}
.budget{stroke:#D55E00;stroke-width:2;stroke-dasharray:6 4}.budget-label{font-size:12px;fill:#D55E00;font-weight:bold;paint-order:stroke;stroke:#fff;stroke-width:3px}
.peak-marker{fill:#fff;stroke:#000;stroke-width:2}.peak-label{font-size:12px;font-weight:bold;paint-order:stroke;stroke:#fff;stroke-width:3px}
.sweep-line{fill:none;stroke:#0072B2;stroke-width:2}.sweep-point.feasible{fill:#0072B2}
.sweep-point.infeasible{stroke:#D55E00;stroke-width:2}
</style>)";

std::string PageStart(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
         Escape(title) + "</title>" + kStyle + "</head><body>\n";
}

}  // namespace

Downsampled DownsampleByMax(const SimResult& sim, size_t max_buckets) {
  Downsampled out;
  uint64_t steps = sim.total.size();
  if (steps == 0 || max_buckets == 0) return out;
  uint64_t count = std::min<uint64_t>(steps, max_buckets);
  out.first_step.reserve(count);
  out.step.reserve(count);
  for (uint64_t b = 0; b < count; ++b) {
    uint64_t begin = b * steps / count, end = (b + 1) * steps / count;
    uint64_t best = begin;
    for (uint64_t s = begin + 1; s < end; ++s) {
      if (sim.total[s] > sim.total[best]) best = s;
    }
    out.first_step.push_back(static_cast<uint32_t>(begin));
    out.step.push_back(static_cast<uint32_t>(best));
  }
  return out;
}

std::string SweepSectionHtml(const std::vector<SweepPoint>& points, CostUnit cost_unit) {
  std::vector<SweepPoint> sorted = points;
  std::sort(sorted.begin(), sorted.end(), [](const SweepPoint& a, const SweepPoint& b) {
    if (a.budget_bytes != b.budget_bytes) return a.budget_bytes < b.budget_bytes;
    if (a.feasible != b.feasible) return a.feasible > b.feasible;
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
    return a.recompute_cost < b.recompute_cost;
  });
  std::string out = "<section id=\"sweep\"><h2>Budget sweep</h2>";
  if (sorted.empty()) return out + "<p>No sweep points.</p></section>";
  int64_t lo = sorted.front().budget_bytes, hi = sorted.back().budget_bytes;
  double max_cost = 0;
  for (const SweepPoint& p : sorted) {
    if (p.feasible) max_cost = std::max(max_cost, p.recompute_cost);
  }
  Axis cost_axis = NiceAxis(max_cost);
  double span = hi > lo ? static_cast<double>(hi - lo) : 1.0;
  auto x_of = [&](int64_t budget) {
    double offset = hi > lo ? static_cast<double>(budget - lo) : span / 2;
    return kPlotLeft + 10 + offset / span * (kPlotWidth - 20);
  };
  auto y_of = [&](double cost) {
    return kPlotTop + kPlotHeight - cost / cost_axis.max * kPlotHeight;
  };

  out += "<svg class=\"chart sweep-chart\" width=\"" + std::to_string(kChartWidth) +
         "\" height=\"" + std::to_string(kChartHeight) + "\" viewBox=\"0 0 " +
         std::to_string(kChartWidth) + " " + std::to_string(kChartHeight) +
         "\" role=\"img\" aria-label=\"recompute cost against budget\"><text class=\"axis-title\" "
         "x=\"" +
         std::to_string(kPlotLeft) + "\" y=\"" + std::to_string(kPlotTop - 10) +
         "\">recompute cost per step, by budget</text>";
  for (double value = 0; value <= cost_axis.max + cost_axis.step / 2; value += cost_axis.step) {
    double y = y_of(value);
    out += "<line class=\"grid\" x1=\"" + std::to_string(kPlotLeft) + "\" x2=\"" +
           std::to_string(kPlotLeft + kPlotWidth) + "\" y1=\"" + Fixed(y, 1) + "\" y2=\"" +
           Fixed(y, 1) + "\"/><text class=\"tick\" x=\"" + std::to_string(kPlotLeft - 6) +
           "\" y=\"" + Fixed(y + 4, 1) + "\" text-anchor=\"end\">" + CostText(cost_unit, value) +
           "</text>";
  }
  std::string line;
  for (const SweepPoint& p : sorted) {
    double x = x_of(p.budget_bytes);
    std::string tip = "<title>budget " + FormatBytes(p.budget_bytes) + ": " +
                      (p.feasible ? "peak " + FormatBytes(p.peak_bytes) + ", recompute " +
                                        CostText(cost_unit, p.recompute_cost)
                                  : "infeasible, lowest peak " + FormatBytes(p.peak_bytes)) +
                      "</title>";
    if (p.feasible) {
      double y = y_of(p.recompute_cost);
      line += (line.empty() ? "" : " ") + Fixed(x, 1) + "," + Fixed(y, 1);
      out += "<circle class=\"sweep-point feasible\" cx=\"" + Fixed(x, 1) + "\" cy=\"" +
             Fixed(y, 1) + "\" r=\"4\">" + tip + "</circle>";
    } else {
      double y = kPlotTop + kPlotHeight;
      out += "<path class=\"sweep-point infeasible\" d=\"M" + Fixed(x - 4, 1) + "," +
             Fixed(y - 4, 1) + "l8,8m0,-8l-8,8\">" + tip + "</path>";
    }
  }
  if (!line.empty()) out += "<polyline class=\"sweep-line\" points=\"" + line + "\"/>";
  for (int64_t budget : {lo, hi}) {
    out += "<text class=\"tick\" x=\"" + Fixed(x_of(budget), 1) + "\" y=\"" +
           std::to_string(kPlotTop + kPlotHeight + 16) + "\" text-anchor=\"middle\">" +
           FormatBytes(budget) + "</text>";
    if (hi == lo) break;
  }
  out += "<text class=\"axis-title\" x=\"" + std::to_string(kPlotLeft + kPlotWidth / 2) +
         "\" y=\"" + std::to_string(kPlotTop + kPlotHeight + 34) +
         "\" text-anchor=\"middle\">budget (&#215; marks a budget no plan fits)</text></svg>";

  out +=
      "<table id=\"sweep-points\"><thead><tr><th>budget</th><th>peak</th>"
      "<th>recompute cost</th><th>fits</th></tr></thead><tbody>";
  // An infeasible point's peak is the lowest the planner reached.
  for (const SweepPoint& p : sorted) {
    out += "<tr>" + BytesCell(p.budget_bytes) + BytesCell(p.peak_bytes) +
           (p.feasible
                ? "<td class=\"num\">" + CostText(cost_unit, p.recompute_cost) + "</td><td>yes</td>"
                : std::string("<td>-</td><td>no</td>")) +
           "</tr>";
  }
  return out + "</tbody></table></section>";
}

std::string RenderHtmlReport(const Graph& graph, const HtmlReportInput& input) {
  std::string title = "ckptplan " + input.command + ": " + input.graph_path;
  std::string out = PageStart(title);
  out += "<h1>ckptplan memory report</h1><p class=\"meta\">" + Escape(input.command) +
         " &middot; " + Escape(input.graph_path) + " &middot; " +
         std::to_string(graph.nodes.size()) + " nodes, " + std::to_string(graph.tensors.size()) +
         " tensors &middot; ckptplan " + CKPTPLAN_VERSION + "</p>\n";
  bool has_memory = input.planned != nullptr && input.save_all != nullptr &&
                    input.keep != nullptr && !input.planned->steps.empty();
  if (has_memory) {
    const SimResult& planned = *input.planned;
    const SimResult& save_all = *input.save_all;
    RequireCategories(planned);
    RequireCategories(save_all);
    bool both = &planned != &save_all;
    out += "<section id=\"summary\"><h2>Summary</h2>" + KeyFigures(graph, input) + "</section>\n";
    double axis_max = static_cast<double>(
        std::max({planned.peak_bytes, save_all.peak_bytes, input.budget_bytes, int64_t{1}}));
    out += "<section id=\"timeline\"><h2>Memory per step, by category</h2>" +
           Legend(input.budget_bytes >= 0);
    out += MemoryChart(graph, planned, "chart-planned",
                       both ? "With the plan" : "Simulated (every candidate saved)", axis_max,
                       input.budget_bytes);
    const bool offloads = input.offloaded && !input.offloaded->copies.empty();
    if (offloads) out += CopyLanes(graph, planned, *input.offloaded);
    if (both) {
      out += MemoryChart(graph, save_all, "chart-save-all", "Save-all (no recompute)", axis_max,
                         input.budget_bytes);
    }
    out += "</section>\n<section id=\"peak\"><h2>At the peak</h2>" + BreakdownTable(input) +
           "<h3>Largest tensors live at the peak</h3>" + TopTensorsTable(graph, input) +
           "</section>\n<section id=\"plan\"><h2>Decisions</h2>" + DecisionsTable(graph, input) +
           (offloads ? OffloadTable(graph, *input.offloaded) : std::string()) +
           "</section>\n";
  }
  if (!input.sweep.empty()) out += SweepSectionHtml(input.sweep, graph.cost_unit) + "\n";
  return out + "</body></html>\n";
}

}  // namespace ckptplan
