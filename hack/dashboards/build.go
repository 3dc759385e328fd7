package main

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// A spec is one dashboard: its file name (config/grafana/<file>.json), uid, title, what it
// answers, its variables beside the data source, and its rows of panels.
type spec struct {
	file, uid, title, description string
	vars                          []variable
	rows                          []row
}

type row struct {
	title  string
	panels []panel
}

// A panel is a time series, or a stat (the last value) when stat is set.
type panel struct {
	title, description, unit string
	stat                     bool
	queries                  []query
}

type query struct{ expr, legend string }

// A variable is a query variable of the data source: label_values(selector, label),
// multi-valued with All (.*), so that queries select with label=~"$name".
type variable struct{ name, label, selector string }

// rateInterval is Grafana's window for rate() and increase(), at least four scrapes.
const rateInterval = "$__rate_interval"

// datasource is the dashboards' one data source variable.
var datasource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

func ptr[T any](v T) *T { return &v }

// build turns s into a Grafana dashboard (schema v1, as the Grafana sidecar loads it).
func build(s spec) (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder(s.title).
		Uid(s.uid).
		Description(s.description).
		Tags([]string{"quartet"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	for _, v := range s.vars {
		b = b.WithVariable(dashboard.NewQueryVariableBuilder(v.name).
			Label(v.label).
			Datasource(datasource).
			Query(dashboard.StringOrMap{String: ptr(fmt.Sprintf("label_values(%s, %s)", v.selector, v.name))}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			AllValue(".*"))
	}
	id := uint32(0)
	for _, r := range s.rows {
		id++
		b = b.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		for _, p := range r.panels {
			id++
			b = b.WithPanel(panelBuilder(p, id))
		}
	}
	return b.Build()
}

func panelBuilder(p panel, id uint32) cog.Builder[dashboard.Panel] {
	if p.stat {
		sb := stat.NewPanelBuilder().Id(id).Title(p.title).Description(p.description).Unit(p.unit).
			Datasource(datasource).Height(6).Span(6).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
		for _, q := range p.queries {
			sb = sb.WithTarget(target(q))
		}
		return sb
	}
	tb := timeseries.NewPanelBuilder().Id(id).Title(p.title).Description(p.description).Unit(p.unit).
		Datasource(datasource).Height(8).Span(12).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).Calcs([]string{"lastNotNull", "max"}))
	for _, q := range p.queries {
		tb = tb.WithTarget(target(q))
	}
	return tb
}

func target(q query) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource).Expr(q.expr).LegendFormat(q.legend)
}
