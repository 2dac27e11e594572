package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Charts are plain SVG 1.1 written by hand: no script, no external font or
// style sheet, explicit sizes and a white background, so that GitHub shows
// them as images in Markdown.

// Series is one line of a line chart, or one colour of a bar chart.
type Series struct {
	Name   string
	Points []Point
}

// Point is one (x, y) of a series.
type Point struct{ X, Y float64 }

var palette = []string{"#1f77b4", "#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

const (
	chartH                     = 420
	padL, padR, padT, padB     = 78, 190, 44, 56
	plotW, plotH               = 492, chartH - padT - padB
	fontFamily                 = "Helvetica, Arial, sans-serif"
	axisColor, gridColor, text = "#444", "#ddd", "#222"
)

type svgDoc struct {
	b     strings.Builder
	w, pw float64 // the chart's width and its plot's
}

// newSVG starts a chart whose plot is plotWidth wide.
func newSVG(title string, plotWidth float64) *svgDoc {
	d := &svgDoc{pw: plotWidth, w: padL + plotWidth + padR}
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%d" viewBox="0 0 %.0f %d" font-family="%s">`+"\n",
		d.w, chartH, d.w, chartH, fontFamily)
	fmt.Fprintf(&d.b, `<rect x="0" y="0" width="%.0f" height="%d" fill="#fff"/>`+"\n", d.w, chartH)
	d.text(d.w/2, 24, 16, "middle", "bold", title)
	return d
}

func (d *svgDoc) text(x, y float64, size int, anchor, weight, s string) {
	fmt.Fprintf(&d.b, `<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" font-weight="%s" fill="%s">%s</text>`+"\n",
		x, y, size, anchor, weight, text, html.EscapeString(s))
}

func (d *svgDoc) line(x1, y1, x2, y2 float64, color string, width float64, dash string) {
	extra := ""
	if dash != "" {
		extra = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
	}
	fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>`+"\n", x1, y1, x2, y2, color, width, extra)
}

func (d *svgDoc) String() string { return d.b.String() + "</svg>\n" }

// axis maps values onto pixels, linearly or logarithmically, with ticks.
type axis struct {
	lo, hi float64
	log    bool
}

func newAxis(vals []float64, log, fromZero bool) axis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if log && v <= 0 {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	if log {
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if hi <= lo {
			hi = lo * 10
		}
		return axis{lo, hi, true}
	}
	if fromZero {
		lo = 0
	}
	step := niceStep((hi - lo) / 5)
	hi = math.Ceil(hi/step) * step
	lo = math.Floor(lo/step) * step
	if hi <= lo {
		hi = lo + step
	}
	return axis{lo, hi, false}
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// frac is v's position on the axis, 0..1.
func (a axis) frac(v float64) float64 {
	if a.log {
		if v <= 0 {
			return 0
		}
		return (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	}
	return (v - a.lo) / (a.hi - a.lo)
}

func (a axis) ticks() []float64 {
	var t []float64
	if a.log {
		for v := a.lo; v <= a.hi*1.0001; v *= 10 {
			t = append(t, v)
		}
		return t
	}
	step := niceStep((a.hi - a.lo) / 5)
	for v := a.lo; v <= a.hi+step/1000; v += step {
		t = append(t, v)
	}
	return t
}

// human formats an axis value: 1.5k, 2M, 250µs.
func human(v float64, unit string) string {
	if unit == "ns" {
		return dur(v)
	}
	switch a := math.Abs(v); {
	case a >= 1e9:
		return trimZero(v/1e9) + "G"
	case a >= 1e6:
		return trimZero(v/1e6) + "M"
	case a >= 1e3:
		return trimZero(v/1e3) + "k"
	}
	return trimZero(v)
}

func trimZero(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

// frame draws the y grid and both axes' labels.
func (d *svgDoc) frame(y axis, yUnit, yLabel, xLabel string) {
	for _, t := range y.ticks() {
		py := padT + plotH*(1-y.frac(t))
		d.line(padL, py, padL+d.pw, py, gridColor, 1, "")
		d.text(padL-6, py+4, 11, "end", "normal", human(t, yUnit))
	}
	d.line(padL, padT, padL, padT+plotH, axisColor, 1, "")
	d.line(padL, padT+plotH, padL+d.pw, padT+plotH, axisColor, 1, "")
	if xLabel != "" {
		d.text(padL+d.pw/2, chartH-12, 12, "middle", "normal", xLabel)
	}
	fmt.Fprintf(&d.b, `<text x="16" y="%.1f" font-size="12" text-anchor="middle" fill="%s" transform="rotate(-90 16 %.1f)">%s</text>`+"\n",
		padT+plotH/2.0, text, padT+plotH/2.0, html.EscapeString(yLabel))
}

func (d *svgDoc) legend(names []string) {
	for i, n := range names {
		y := float64(padT + 10 + 20*i)
		x := float64(padL + d.pw + 16)
		fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`+"\n", x, y-10, palette[i%len(palette)])
		d.text(x+18, y, 12, "start", "normal", n)
	}
}

// LineChart draws series over a logarithmic x axis (batch sizes,
// partition counts), y linear from zero or logarithmic.
func LineChart(title, xLabel, yLabel string, series []Series, logY bool) string {
	var xs, ys []float64
	for _, s := range series {
		for _, p := range s.Points {
			xs, ys = append(xs, p.X), append(ys, p.Y)
		}
	}
	xa, ya := newAxis(xs, true, false), newAxis(ys, logY, true)
	d := newSVG(title, plotW)
	d.frame(ya, "", yLabel, xLabel)
	for _, t := range xa.ticks() {
		px := padL + d.pw*xa.frac(t)
		d.line(px, padT, px, padT+plotH, gridColor, 1, "")
		d.text(px, padT+plotH+16, 11, "middle", "normal", human(t, ""))
	}
	var names []string
	for i, s := range series {
		c := palette[i%len(palette)]
		names = append(names, s.Name)
		var pts []string
		for _, p := range s.Points {
			px, py := padL+d.pw*xa.frac(p.X), padT+plotH*(1-ya.frac(p.Y))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&d.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
		}
		for k, p := range s.Points {
			var px, py float64
			fmt.Sscanf(pts[k], "%f,%f", &px, &py)
			fmt.Fprintf(&d.b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s at %s</title></circle>`+"\n",
				px, py, c, html.EscapeString(s.Name), human(p.Y, ""), human(p.X, ""))
		}
	}
	d.legend(names)
	return d.String()
}

// BarChart draws groups of bars (one bar per series in each group) over a
// y axis in unit ("ns" formats durations), linear or logarithmic.
func BarChart(title, yLabel, unit string, groups []string, series []Series, logY bool) string {
	var ys []float64
	for _, s := range series {
		for _, p := range s.Points {
			ys = append(ys, p.Y)
		}
	}
	ya := newAxis(ys, logY, true)
	d := newSVG(title, math.Max(plotW, 64*float64(len(groups))))
	d.frame(ya, unit, yLabel, "")
	n := max(len(groups), 1)
	gw := float64(d.pw) / float64(n)
	bw := gw * 0.8 / float64(max(len(series), 1))
	var names []string
	for i, s := range series {
		names = append(names, s.Name)
		for _, p := range s.Points { // X is the group index
			if p.Y <= 0 && logY {
				continue
			}
			x := padL + gw*p.X + gw*0.1 + bw*float64(i)
			top := padT + plotH*(1-math.Max(0, ya.frac(p.Y)))
			fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %s</title></rect>`+"\n",
				x, top, bw, padT+plotH-top, palette[i%len(palette)], html.EscapeString(groups[int(p.X)]), html.EscapeString(s.Name), human(p.Y, unit))
		}
	}
	for g, name := range groups {
		cx := padL + gw*(float64(g)+0.5)
		for k, part := range strings.Split(name, "\n") {
			d.text(cx, padT+plotH+16+float64(13*k), 11, "middle", "normal", part)
		}
	}
	d.legend(names)
	return d.String()
}
