package ui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Chart geometry, in SVG user units.
const (
	chartW = 600
	chartH = 120
)

// chart is one series of the history, drawn as an inline SVG polyline.
type chart struct {
	Title  string
	Now    string // the newest value, for people
	Max    string // the top of the scale, for people
	Span   string // how much time the chart covers
	Points string // the polyline's points, "x,y x,y …"
	Area   string // the same, closed along the bottom, for the fill
	Note   string // shown instead when there is nothing to draw
}

// series is one value of a sample, with its unit's formatting.
type series struct {
	title  string
	value  func(prev, s sample) (float64, bool) // false: no value here
	format func(float64) string
	note   string // when no sample has a value
}

func makeChart(samples []sample, sr series) chart {
	c := chart{Title: sr.title}
	type pt struct {
		t time.Time
		v float64
	}
	var pts []pt
	for i, s := range samples {
		prev := s
		if i > 0 {
			prev = samples[i-1]
		}
		if v, ok := sr.value(prev, s); ok {
			pts = append(pts, pt{s.at, v})
		}
	}
	if len(pts) == 0 {
		c.Note = sr.note
		return c
	}
	top := 0.0
	for _, p := range pts {
		top = math.Max(top, p.v)
	}
	top = niceCeil(top)
	first, last := pts[0].t, pts[len(pts)-1].t
	span := last.Sub(first)
	var b strings.Builder
	for i, p := range pts {
		x := float64(chartW)
		if span > 0 {
			x = float64(p.t.Sub(first)) / float64(span) * chartW
		}
		y := chartH - p.v/top*(chartH-4) // 4 units of headroom for the stroke
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64))
	}
	c.Points = b.String()
	if len(pts) == 1 { // one sample: a flat line across
		y := strconv.FormatFloat(chartH-pts[0].v/top*(chartH-4), 'f', 1, 64)
		c.Points = "0," + y + " " + strconv.Itoa(chartW) + "," + y
	}
	c.Area = fmt.Sprintf("0,%d %s %d,%d", chartH, c.Points, chartW, chartH)
	c.Now = sr.format(pts[len(pts)-1].v)
	c.Max = sr.format(top)
	c.Span = span.Round(time.Second).String()
	return c
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// The dashboard's charts.
var (
	backlogSeries = series{
		title:  "Backlog",
		value:  func(_, s sample) (float64, bool) { return float64(s.pending), true },
		format: func(v float64) string { return strconv.FormatInt(int64(v), 10) + " pending" },
	}
	lagSeries = series{
		title:  "Lag",
		value:  func(_, s sample) (float64, bool) { return s.lag.Seconds(), true },
		format: func(v float64) string { return seconds(v) },
	}
	throughputSeries = series{
		title: "Throughput",
		value: func(prev, s sample) (float64, bool) {
			dt := s.at.Sub(prev.at).Seconds()
			if !s.relays || !prev.relays || dt <= 0 || s.published < prev.published {
				return 0, false
			}
			return float64(s.published-prev.published) / dt, true
		},
		format: func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " ev/s" },
		note:   "known for the relays of this process only: outbox relay --ui-addr, or a program that adds its relay (Dashboard.AddRelay)",
	}
)

// seconds formats a duration in seconds for people: "850ms", "12s", "3m20s".
func seconds(v float64) string {
	d := time.Duration(v * float64(time.Second))
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
