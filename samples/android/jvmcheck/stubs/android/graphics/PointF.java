package android.graphics; public class PointF { public float x; public float y; public PointF(float x, float y) {} }
