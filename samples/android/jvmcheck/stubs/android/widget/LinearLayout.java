package android.widget; public class LinearLayout extends android.view.ViewGroup {
  public static final int HORIZONTAL = 0; public static final int VERTICAL = 1;
  public LinearLayout(android.content.Context c) { super(c); }
  public int getOrientation() { return 0; } public void setOrientation(int o) {}
  public static class LayoutParams extends android.view.ViewGroup.LayoutParams { public LayoutParams(int w, int h) { super(w, h); } public LayoutParams(int w, int h, float weight) { super(w, h); } } }
